// SnapshotVersions: what an ordered read at a snapshot needs that the store
// no longer holds: the versions updates replaced while a snapshot was open.
//
// The store keeps one version per key (the frontend's item, else the
// backend's entry). A scan at snapshot S (every update numbered <= S, none
// after) reads each key's current version; when that is newer than S, the
// version S sees was replaced by an update numbered > S, and that update
// kept it here (keep()) before it logged anything, under the key's bucket
// lock. So a reader that sees the newer version (after the bucket lock is
// released) finds the kept one. Keys that left the store after S are found
// here too (keys()), since a remove keeps what it removes.
//
// Which updates keep: every update that sees wanted() true. The protocol
// that makes this enough (open(), StoreImpl::update):
//   snapshot: count + 1 [seq_cst]; S = next_seq - 1 [seq_cst], pinned;
//             then (the caller) waits for every update numbered <= S to
//             be installed.
//   update:   n = next_seq++ [seq_cst]; if (wanted()) keep(...).
// If n > S, the snapshot's load of next_seq came before the update's
// increment in the one order of seq_cst operations, so its count + 1 did
// too, and the update's wanted() sees it.
//
// Only a version some open snapshot sees is kept (one written after every
// open snapshot is not, nor one of a key outside the range every snapshot
// that sees it reads), and it is dropped once no open snapshot can need
// it (a version replaced by update n serves snapshots older than n only):
// all of it when the last snapshot closes, and what the oldest one needed
// when it closes. DRAM: for each open snapshot, at most a copy of each key
// and value it sees that was replaced since, however often keys are
// overwritten.
#ifndef KVSTORE_SNAPSHOT_VERSIONS_H_
#define KVSTORE_SNAPSHOT_VERSIONS_H_

#include <atomic>
#include <functional>
#include <cstdint>
#include <map>
#include <mutex>
#include <queue>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kv {

class SnapshotVersions {
 public:
  // Whether an update must keep what it replaces. Cheap: one load of a line
  // that changes only when a snapshot opens or closes.
  bool wanted() const { return open_.load(std::memory_order_seq_cst) > 0; }

  // The keys a snapshot reads: [begin, end), no end when end is empty.
  struct Range {
    std::string begin, end;
    bool covers(std::string_view key) const {
      return key >= begin && (end.empty() || key < end);
    }
  };
  using Pinned = std::multimap<uint64_t, Range>;  // open snapshots by number
  struct Snapshot {
    uint64_t seq = 0;  // S
    Pinned::iterator pin;
  };

  // Opens a snapshot of every update numbered below next_seq now, reading
  // the keys of `range` only, and returns it; its number S is next_seq - 1.
  // The caller must then wait for the updates numbered <= S still in
  // flight before reading at S. May throw bad_alloc.
  Snapshot open(const std::atomic<uint64_t>& next_seq, Range range);
  // Closes a snapshot open() returned.
  void release(const Snapshot& s);

  // Whether an update numbered replaced_by may have to keep what it
  // replaces of key: false when no open snapshot older than the update
  // reads the key. Lets a writer skip reading a version from the backend
  // only for keep() to drop it.
  bool may_keep(std::string_view key, uint64_t replaced_by) const;
  // The version with sequence number old_seq (a value, or absent when
  // !present) was replaced by update `replaced_by`. May throw bad_alloc.
  void keep(std::string_view key, uint64_t old_seq, bool present, std::string_view value,
            uint64_t replaced_by);

  // The version of key snapshot s sees, when its current one is newer:
  // false when none was kept (the key was absent at s).
  bool find(std::string_view key, uint64_t s, std::string* value, bool* present) const;

  // Appends the first keys with kept versions past `after` (or at it,
  // when inclusive) and at or before `last` (empty: before end; end empty:
  // no end), sorted, until out holds max; returns whether there are more.
  bool keys(std::string_view after, bool inclusive, std::string_view last, std::string_view end,
            size_t max, std::vector<std::string>* out) const;

  uint64_t open_snapshots() const;
  uint64_t kept_versions() const;

 private:
  struct Version {
    uint64_t seq;          // the version's own number (0: the key never existed)
    uint64_t replaced_by;  // the update that replaced it
    bool present;
    std::string value;
  };
  // Drops the versions no open snapshot needs. REQUIRES: mu_ held.
  void collect();
  // Whether a snapshot numbered in [from, to) reads key. REQUIRES: mu_.
  bool read_by(std::string_view key, uint64_t from, uint64_t to) const;

  alignas(64) std::atomic<uint64_t> open_{0};  // snapshots opening or open
  alignas(64) mutable std::mutex mu_;
  Pinned pinned_;
  std::map<std::string, std::vector<Version>, std::less<>> kept_;
  // (replaced_by, key) of every version kept, the smallest on top.
  using Expiry = std::pair<uint64_t, std::string>;
  std::priority_queue<Expiry, std::vector<Expiry>, std::greater<>> by_replacement_;
  uint64_t versions_ = 0;  // in kept_
};

}  // namespace kv

#endif  // KVSTORE_SNAPSHOT_VERSIONS_H_
