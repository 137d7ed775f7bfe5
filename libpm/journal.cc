#include "libpm/journal.h"

// The state type is needed by value (a state on the stack, not a malloc per
// commit), which xxhash declares only for static linking.
#define XXH_STATIC_LINKING_ONLY
#include <xxhash.h>

#include <algorithm>
#include <cstring>

#include "libpm/planted_bugs.h"
#include "libpm/superblock.h"

namespace pm {

PlantedBugs g_planted_bugs;

uint64_t journal_header_checksum(const JournalHeader& h) {
  return XXH3_64bits(&h, offsetof(JournalHeader, checksum));
}

namespace {

uint64_t header_checksum(const JournalHeader& h) { return journal_header_checksum(h); }

// True if the 64-byte lines differ; compiled to a few vector compares.
inline bool line_differs(const std::byte* a, const std::byte* b) {
  uint64_t x[8], y[8];
  std::memcpy(x, a, kLine);
  std::memcpy(y, b, kLine);
  uint64_t d = 0;
  for (int i = 0; i < 8; i++) d |= x[i] ^ y[i];
  return d != 0;
}

Status write_header(Persist& p, JournalHeader h, int slots) {
  h.checksum = header_checksum(h);
  p.write_flushed(journal_slot_offset(h.seq, slots), &h, sizeof h);
  return p.drain();
}

}  // namespace

// Empty when the body is sound, else why not. Nothing is written.
std::string check_body(const Persist& p, const JournalHeader& h, uint64_t heap_offset) {
  const uint64_t size = p.size();
  if (h.body_offset < heap_offset || h.body_offset > size || h.body_len > size - h.body_offset) {
    return "journal body lies outside the file";
  }
  const std::byte* body = p.view() + h.body_offset;
  if (XXH3_64bits_withSeed(body, h.body_len, h.seq) != h.body_checksum &&
      !g_planted_bugs.skip_body_checksum) {
    return "journal body checksum mismatch";
  }
  uint64_t at = 0, n = 0;
  while (at < h.body_len) {
    JournalEntry e;
    if (h.body_len - at < sizeof e) return "journal entry truncated";
    std::memcpy(&e, body + at, sizeof e);
    at += sizeof e;
    if (e.len > h.body_len - at || e.heap_off > size || e.heap_off > size - heap_offset ||
        e.len > size - heap_offset - e.heap_off) {
      return "journal entry points past the end of the file";
    }
    at += e.len;
    n++;
  }
  if (n != h.entries) return "journal entry count mismatch";
  return "";
}

const char* journal_state_name(JournalState s) {
  switch (s) {
    case JournalState::kEmpty:
      return "empty";
    case JournalState::kApplied:
      return "clean";
    case JournalState::kPending:
      return "pending replay";
    case JournalState::kTorn:
      return "torn (ignored)";
  }
  return "unknown";
}

namespace {

// One header slot: kEmpty, kApplied, kPending or kTorn.
JournalStatus read_slot(const Persist& p, uint64_t slot_offset, uint64_t heap_offset) {
  JournalStatus js;
  if (p.size() < slot_offset + sizeof(JournalHeader)) return js;
  std::memcpy(&js.header, p.view() + slot_offset, sizeof js.header);
  const JournalHeader& h = js.header;
  if (h.magic != kJournalMagic || header_checksum(h) != h.checksum) return js;
  js.last_seq = h.seq;
  if (h.state == static_cast<uint32_t>(JournalState::kApplied)) js.state = JournalState::kApplied;
  if (h.state == static_cast<uint32_t>(JournalState::kPending)) {
    js.why = check_body(p, h, heap_offset);
    js.state = js.why.empty() || g_planted_bugs.replay_torn_journal ? JournalState::kPending
                                                                    : JournalState::kTorn;
  }
  return js;
}

}  // namespace

JournalStatus read_journal(const Persist& p, uint64_t heap_offset, int slots) {
  JournalStatus a = read_slot(p, kJournalHeaderOffset, heap_offset);
  if (slots == 1) return a;
  JournalStatus b = read_slot(p, kJournalSlot1Offset, heap_offset);
  if (b.state == JournalState::kEmpty) return a;
  if (a.state != JournalState::kEmpty && a.header.seq > b.header.seq) std::swap(a, b);
  if (a.state == JournalState::kEmpty) return b;
  // b is the newest; a the one before it. Rule 3 (journal.h).
  const bool a_replays = a.state == JournalState::kPending && a.header.seq + 1 == b.header.seq &&
                         (b.header.flags & kJournalFollowsDeferred) != 0 &&
                         !g_planted_bugs.replay_newest_slot_only;
  if (b.state == JournalState::kPending && a_replays) {
    b.has_previous = true;
    b.previous = a.header;
  } else if (b.state == JournalState::kTorn && a_replays) {
    a.why = "commit " + std::to_string(b.header.seq) + "'s journal is torn (" + b.why +
            ") and never completed";
    a.last_seq = b.last_seq;
    return a;
  }
  return b;
}

uint64_t journal_body_size(const std::vector<Run>& runs) {
  uint64_t n = 0;
  for (const Run& r : runs) n += sizeof(JournalEntry) + r.len;
  return n;
}

void diff_lines(const std::byte* work, const std::byte* home, uint64_t off, uint64_t len,
                std::vector<Run>* runs) {
  for (uint64_t i = 0; i < len; i += kLine) {
    if (!line_differs(work + i, home + i)) continue;
    uint64_t at = off + i;
    if (!runs->empty() && runs->back().off + runs->back().len == at) {
      runs->back().len += kLine;
    } else {
      runs->push_back({at, kLine});
    }
  }
}

Status grow_for_journal(Persist& p, uint64_t body_offset, const std::vector<Run>& runs) {
  uint64_t need = body_offset + journal_body_size(runs);
  if (p.size() >= need) return Status();
  // Round up so that a series of growing commits resizes rarely.
  uint64_t grow = (need + (1ull << 20) - 1) & ~((1ull << 20) - 1);
  return p.resize(p.size(), grow);
}

namespace {

// The journal body goes to the file a staged chunk at a time: entries and
// the lines they carry side by side in DRAM, then one bulk copy. A copy per
// entry and per run flushed the line an entry shares with its neighbours
// twice, and paid a cache miss per destination line; a bulk copy streams
// (libpmem copies 256 bytes and more with non-temporal stores). Runs of a
// page or more are copied straight from the working view. The checksum is
// taken as the bytes go, from DRAM, not read back from the file.
constexpr size_t kStageBytes = 256 << 10;
constexpr uint64_t kDirectRun = 4096;

class BodyWriter {
 public:
  BodyWriter(Persist& p, uint64_t at, uint64_t seq, std::vector<std::byte>* stage)
      : p_(p), at_(at), stage_(*stage) {
    // A state not made by XXH3_createState() must be initialised before a
    // seeded reset: the reset compares the seed it finds with the new one
    // and keeps the secret derived for it when they match.
    XXH3_INITSTATE(&hash_);
    stage_.resize(kStageBytes);
    XXH3_64bits_reset_withSeed(&hash_, seq);
  }

  void add(const void* src, size_t n) {
    const auto* b = static_cast<const std::byte*>(src);
    while (n > 0) {
      const size_t k = std::min(n, kStageBytes - fill_);
      std::memcpy(stage_.data() + fill_, b, k);
      fill_ += k;
      b += k;
      n -= k;
      if (fill_ == kStageBytes) flush_stage();
    }
  }

  // Past what was added so far, without staging.
  void add_direct(const std::byte* src, size_t n) {
    flush_stage();
    emit(src, n);
  }

  // The checksum of everything added.
  uint64_t finish() {
    flush_stage();
    return XXH3_64bits_digest(&hash_);
  }

 private:
  void flush_stage() {
    emit(stage_.data(), fill_);
    fill_ = 0;
  }

  void emit(const std::byte* src, size_t n) {
    if (n == 0) return;
    XXH3_64bits_update(&hash_, src, n);
    if (g_planted_bugs.skip_body_flush) {
      p_.write(at_, src, n);
    } else {
      p_.write_flushed(at_, src, n);
    }
    at_ += n;
  }

  Persist& p_;
  uint64_t at_;
  std::vector<std::byte>& stage_;
  size_t fill_ = 0;
  XXH3_state_t hash_;
};

}  // namespace

Status write_journal(Persist& p, uint64_t seq, uint64_t body_offset, const std::byte* work,
                     const std::vector<Run>& runs, bool* in_doubt, int slots, uint64_t flags,
                     std::vector<std::byte>* stage, bool body_barrier) {
  const uint64_t slot = journal_slot_offset(seq, g_planted_bugs.one_slot_for_all ? 1 : slots);
  JournalHeader prev;
  std::memcpy(&prev, p.view() + slot, sizeof prev);
  uint64_t len = journal_body_size(runs);
  std::vector<std::byte> local;
  BodyWriter body(p, body_offset, seq, stage != nullptr ? stage : &local);
  PM_TRY(grow_for_journal(p, body_offset, runs));
  for (const Run& r : runs) {
    JournalEntry e{r.off, r.len};
    body.add(&e, sizeof e);
    if (r.len >= kDirectRun) {
      body.add_direct(work + r.off, r.len);
    } else {
      body.add(work + r.off, r.len);
    }
  }
  const uint64_t body_checksum = body.finish();
  if (body_barrier && !g_planted_bugs.fresh_in_one_drain) {
    p.kill_point("journal.fresh_and_body_written");
    PM_TRY(p.drain());
  }
  JournalHeader h{};
  h.magic = kJournalMagic;
  h.seq = seq;
  h.body_offset = body_offset;
  h.body_len = len;
  h.body_checksum = body_checksum;
  h.state = static_cast<uint32_t>(JournalState::kPending);
  h.entries = static_cast<uint32_t>(runs.size());
  h.flags = flags;
  h.checksum = header_checksum(h);
  p.kill_point("journal.body_written");
  p.write_flushed(slot, &h, sizeof h);
  // The commit point: body and header become durable together. A crash
  // before the drain completes leaves a header or body that fails its checksum.
  if (g_planted_bugs.skip_journal_drain) return Status();
  Status s = p.drain();
  if (s.ok() || g_planted_bugs.keep_header_after_failed_drain) return s;
  p.write_flushed(slot, &prev, sizeof prev);
  if (!p.drain().ok() && in_doubt != nullptr) *in_doubt = true;
  return s;
}

Status apply_runs(Persist& p, const std::byte* work, const std::vector<Run>& runs,
                  uint64_t heap_offset, bool drain) {
  for (const Run& r : runs) {
    p.write_flushed(heap_offset + r.off, work + r.off, r.len);
  }
  p.kill_point("journal.apply_written");
  if (!drain || g_planted_bugs.skip_writeback_drain) return Status();
  return p.drain();
}

Status replay_journal(Persist& p, const JournalHeader& h, uint64_t heap_offset, int slots) {
  // After a process kill the journal may exist only in the page cache (or
  // CPU caches): the kill fell between writing it and the commit point's
  // drain. Replaying it writes home; a power failure could then keep some of
  // those lines and lose the journal, leaving neither commit. So the journal
  // becomes durable first: the commit it holds completes.
  if (!g_planted_bugs.replay_unsynced_journal) {
    p.flush(journal_slot_offset(h.seq, slots), sizeof h);
    p.flush(h.body_offset, h.body_len);
    PM_TRY(p.drain());
  }
  for_each_journal_entry(p, h, [&](uint64_t off, const std::byte* src, uint64_t len) {
    p.write_flushed(heap_offset + off, src, len);
  });
  p.kill_point("journal.replay_written");
  PM_TRY(p.drain());
  return mark_journal_applied(p, h, slots);
}

void for_each_journal_entry(const Persist& p, const JournalHeader& h,
                            const std::function<void(uint64_t, const std::byte*, uint64_t)>& fn) {
  const std::byte* body = p.view() + h.body_offset;
  for (uint64_t at = 0; at < h.body_len;) {
    JournalEntry e;
    std::memcpy(&e, body + at, sizeof e);
    fn(e.heap_off, body + at + sizeof e, e.len);
    at += sizeof e + e.len;
  }
}

Status mark_journal_slots_applied(Persist& p, uint64_t seq, int slots, bool both) {
  JournalHeader h;
  std::memcpy(&h, p.view() + journal_slot_offset(seq, slots), sizeof h);
  PM_TRY(mark_journal_applied(p, h, slots));
  if (slots != 2 || !both) return Status();
  // The older one only once the newest's mark is durable: a crash between
  // the two finds the newest applied and replays nothing, and a kill
  // before the newest's drain leaves the slots as a close always did.
  std::memcpy(&h, p.view() + journal_slot_offset(seq + 1, slots), sizeof h);  // the other slot
  if (h.magic != kJournalMagic || h.checksum != header_checksum(h) || h.seq >= seq ||
      h.state != static_cast<uint32_t>(JournalState::kPending)) {
    return Status();
  }
  return mark_journal_applied(p, h, slots);
}

Status mark_journal_applied(Persist& p, JournalHeader h, int slots) {
  h.state = static_cast<uint32_t>(JournalState::kApplied);
  return write_header(p, h, slots);
}

}  // namespace pm
