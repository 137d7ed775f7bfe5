// Journal: the redo log that makes commit() atomic.
//
// A commit writes the changed 64-byte-line runs of the working view as a body
// of entries past the end of the heap, then a 64-byte header at file offset
// 512 that names the body and carries its checksum (seeded with the sequence
// number, so an old body at the same place never validates). One drain makes
// both durable: that is the commit point. Then the runs are copied to their
// home locations and drained again. Open replays a valid pending journal;
// replay is idempotent. A torn header or body fails its checksum and is
// ignored: it belongs to a commit that never returned. Format:
// docs/container_format.md.
#ifndef LIBPM_JOURNAL_H_
#define LIBPM_JOURNAL_H_

#include <cstddef>
#include <cstdint>
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
  uint64_t reserved;
  uint64_t checksum;  // XXH3-64 of the bytes before it
};
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

// Reads the header from the home view: kEmpty when it does not validate;
// for a pending header, also validates the body (kTorn when it fails: a
// crash during the commit, which never returned).
struct JournalStatus {
  JournalState state = JournalState::kEmpty;
  JournalHeader header{};
  std::string why;  // for kTorn
};
JournalStatus read_journal(const Persist& p, uint64_t heap_offset = kHeapOffset);

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
Status write_journal(Persist& p, uint64_t seq, uint64_t body_offset, const std::byte* work,
                     const std::vector<Run>& runs, bool* in_doubt = nullptr);

// Copies `runs` from the working view to their home locations and drains.
Status apply_runs(Persist& p, const std::byte* work, const std::vector<Run>& runs,
                  uint64_t heap_offset = kHeapOffset);

// Makes the journal durable (it may be only in the page cache after a
// kill), applies the body named by a pending header (read_journal said
// kPending) to the home view, drains, and marks the header applied.
Status replay_journal(Persist& p, const JournalHeader& h, uint64_t heap_offset = kHeapOffset);

// Rewrites the header with state kApplied (so open skips the replay) and drains.
Status mark_journal_applied(Persist& p, JournalHeader h);

}  // namespace pm

#endif  // LIBPM_JOURNAL_H_
