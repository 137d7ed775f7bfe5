// Journal: the redo log that makes commit() atomic.
//
// A commit writes the changed 64-byte-line runs of the working view as a body
// of entries past the end of the heap, then a 64-byte header that names the
// body and carries its checksum (seeded with the sequence number, so an old
// body at the same place never validates). One drain makes both durable:
// that is the commit point. Then the runs are copied to their home
// locations (the write-back). Open replays a valid pending journal; replay
// is idempotent. A torn header or body fails its checksum and is ignored:
// it belongs to a commit that never returned. Format:
// docs/container_format.md.
//
// Header slots. Version-4 files have two: commit n writes slot n % 2, so
// the header of commit n-1 stays intact while commit n is written. Older
// files have slot 0 only.
//
// Deferred write-back. Off pmem a drain is a device flush (fdatasync), the
// cost of a small commit. In a two-slot file off pmem a commit's write-back
// is not drained: the next commit's drain makes it durable along with that
// commit's journal. A crash inside that drain may keep any part of the
// deferred write-back, with or without the new header, so the deferred
// commit must stay replayable until the drain completes. Three rules:
//  1. the new header goes to the other slot (above);
//  2. the new body does not overlap the deferred commit's body
//     (ContainerImpl::place_body);
//  3. when the newest header says it follows a deferred write-back, recovery
//     replays the commit before it first (pending, body sound), or alone
//     when the newest's body is torn (read_journal). Only then, since
//     without the flag a torn newest may be a completed commit whose body
//     a later one overwrote, and replaying the commit before it would undo
//     it.
// Fresh bytes. Changed bytes where the committed heap keeps nothing (new
// blocks in space free before the commit, segments grown since) need no
// journal: a crash before the commit point leaves them where no recovered
// state reads. The container writes them home before the journal (their
// only copy) and then needs a barrier between them and the header, which
// names no checksum of them: fresh bytes and body are drained, then the
// header is written and drained (write_journal's `body_barrier`). Two rules
// more, since a recovery may still replay the previous commit after this
// one's header is durable (rule 3): fresh bytes overlap none of that
// commit's entries, nor its body (ContainerImpl::commit_locked).
// Whatever marks a header applied (close, heap growth) drains first, and a
// writable open makes the header slots it found durable, so that the disk
// never holds a pending header the process believes applied (a kill
// between marking and draining).
#ifndef LIBPM_JOURNAL_H_
#define LIBPM_JOURNAL_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "libpm/persist.h"
#include "libpm/superblock.h"
#include "pm/container.h"
#include "pm/status.h"

namespace pm {

inline constexpr uint64_t kJournalMagic = 0x4c4e524a4d50ull;  // "PMJRNL"
inline constexpr uint64_t kLine = 64;

struct JournalHeader {
  uint64_t magic;
  uint64_t seq;          // commit number, 1, 2, ...
  uint64_t body_offset;  // file offset of the body
  uint64_t body_len;
  uint64_t body_checksum;  // XXH3-64 of the body, seeded with seq
  uint32_t state;          // JournalState: kPending or kApplied
  uint32_t entries;
  uint64_t flags;     // kJournalFollowsDeferred (version 4; zero before)
  uint64_t checksum;  // XXH3-64 of the bytes before it
};
// The commit before this one had its write-back deferred (not yet durable)
// when this header was written: a crash inside this commit needs that one
// replayed (rule 3 below).
inline constexpr uint64_t kJournalFollowsDeferred = 1;
static_assert(sizeof(JournalHeader) == 64);

// The checksum a header carries (of the bytes before it).
uint64_t journal_header_checksum(const JournalHeader& h);

// Entry in the body: header then `len` bytes of data. len is a multiple of 64.
struct JournalEntry {
  uint64_t heap_off;  // offset from the start of the heap
  uint64_t len;
};
static_assert(sizeof(JournalEntry) == 16);

// A changed run of the working view, relative to the heap start.
struct Run {
  uint64_t off;
  uint64_t len;
};

// File offset of the header slot of commit `seq` in a file with `slots`
// header slots (1 or 2).
inline uint64_t journal_slot_offset(uint64_t seq, int slots) {
  return slots == 2 && seq % 2 == 1 ? kJournalSlot1Offset : kJournalHeaderOffset;
}

// Reads the header slots from the home view. The newest header that
// validates decides: applied, pending (its body validates too) or torn (a
// crash during that commit, which never returned). When it follows a
// deferred write-back, the commit before it (pending, body sound) is
// replayed first (`previous`), or instead of a torn newest (state kPending,
// `header` that commit, `why` saying so). kEmpty when no header validates.
struct JournalStatus {
  JournalState state = JournalState::kEmpty;
  JournalHeader header{};
  std::string why;  // for kTorn, or a torn newest commit passed over
  bool has_previous = false;  // replay `previous` before `header`
  JournalHeader previous{};
  uint64_t last_seq = 0;  // the highest sequence number of a valid header
};
JournalStatus read_journal(const Persist& p, uint64_t heap_offset = kHeapOffset, int slots = 1);

// Appends to `runs` the 64-byte-line runs where [work, work+len) differs from
// [home, home+len); `off` is the heap offset of both. Adjacent runs merge.
void diff_lines(const std::byte* work, const std::byte* home, uint64_t off, uint64_t len,
                std::vector<Run>* runs);

// Grows the file (remapping the view) when the journal body for `runs` does
// not fit past body_offset. write_journal calls it too; a caller that must
// keep others off the view during the remap calls it first, under its lock.
Status grow_for_journal(Persist& p, uint64_t body_offset, const std::vector<Run>& runs);

// Writes the journal for `runs` (data taken from `work`, the working view
// base) at body_offset, then its header, and drains: the commit point.
// Grows the file when the body does not fit. When that drain fails, the
// new header may have reached the file all the same (it was in the page
// cache): the previous header is written back and drained, so that a
// commit that reported failure is never replayed; if that drain fails too,
// *in_doubt is set: the file may or may not hold the commit.
// The header goes to the slot of `seq` (journal_slot_offset) with `flags`.
// The body is staged through `stage` (kept between commits by the caller;
// a local buffer when null). Throws std::bad_alloc, before anything is
// written, when no memory for the staging can be had. With `body_barrier`
// the body (and whatever the caller wrote and flushed before it: fresh
// bytes, above) is drained before the header is written; when that drain
// fails nothing names the body.
Status write_journal(Persist& p, uint64_t seq, uint64_t body_offset, const std::byte* work,
                     const std::vector<Run>& runs, bool* in_doubt = nullptr, int slots = 1,
                     uint64_t flags = 0, std::vector<std::byte>* stage = nullptr,
                     bool body_barrier = false);

// Bytes of the journal body that holds `runs`.
uint64_t journal_body_size(const std::vector<Run>& runs);

// Copies `runs` from the working view to their home locations and flushes
// them; drains unless `drain` is false (a deferred write-back, above).
Status apply_runs(Persist& p, const std::byte* work, const std::vector<Run>& runs,
                  uint64_t heap_offset = kHeapOffset, bool drain = true);

// Makes the journal durable (it may be only in the page cache after a
// kill), applies the body named by a pending header (read_journal said
// kPending) to the home view, drains, and marks the header applied.
Status replay_journal(Persist& p, const JournalHeader& h, uint64_t heap_offset = kHeapOffset,
                      int slots = 1);

// Calls fn(heap offset, bytes, length) for each entry of the body a pending
// header names (read_journal checked their bounds), in order.
void for_each_journal_entry(const Persist& p, const JournalHeader& h,
                            const std::function<void(uint64_t, const std::byte*, uint64_t)>& fn);

// Rewrites the header with state kApplied (so open skips the replay) and drains.
Status mark_journal_applied(Persist& p, JournalHeader h, int slots = 1);

// Marks the last commit's header (`seq`) applied and drains; then, with
// `both` and two slots, the other slot's pending header too (the commit
// before, whose write-back `seq`'s drain made durable). REQUIRES:
// every commit up to `seq` written back and drained. The container marks
// both, at a clean close and mid-session: else a damaged newest header
// (media, not a crash) would leave the older one pending, and recovery
// would replay it over newer bytes, half of a later transaction undone,
// silently. (`both` false: the planted bugs close_marks_newest_only and
// finish_marks_newest_only.)
Status mark_journal_slots_applied(Persist& p, uint64_t seq, int slots, bool both);

}  // namespace pm

#endif  // LIBPM_JOURNAL_H_
