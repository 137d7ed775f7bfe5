// PendingKeys: the keys of the log records no gleaner has applied yet, kept
// in key order between ordered reads.
//
// An ordered read merges the backend's index with these keys. Reading them
// from the logs at every seek cost the whole backlog each time: beside one
// writer at 0.95 M puts/s, a scan of 100 keys took 3.2 ms instead of 19 us,
// since each seek re-read and re-checksummed thousands of records. Here
// each record is read once, when a reader first needs it.
//
// What a reader gets holds every key of [cursor, tail) of every log that
// the index may lack, and perhaps keys of records applied since. Left out:
// - removes: a removed key is not read;
// - puts logged as kOpKeyIndexed (crl.h) by this session: the key is in
//   the working index, and stays there until a newer remove is applied
//   (StoreImpl::update, key_indexed). Beside a writer that overwrites, that
//   is nearly every record. Records of an earlier session do not count: a
//   crash lost what was applied and not committed.
// The keys read by one call form a sorted run, runs merge as they
// accumulate, and a run is forgotten once its log's cursor has passed all
// of its records. A key of an applied record is harmless to an ordered
// read, which reads every key as a get would: the key is in the index
// too, or gone from the store.
//
// Why runs and not one ordered map: beside a writer the reader adds a few
// hundred keys per scan to a set of tens of thousands, and forgets as
// many. A map paid a node allocation, a string allocation and a walk of
// cache misses for each, and took half of a scan (docs/ordered.md,
// measured). A run is sorted once in cache, merged sequentially, and
// searched through an array of the keys' first 8 bytes. Runs merge while
// the newer is at least half the older's size, so a log holds O(log n).
//
// DRAM: each key's bytes and 16 bytes, per run it is in (a merged run
// stays until its newest record is applied: about three times the logs'
// backlog at most).
//
// Thread safety: every call takes the one mutex; readers are expected to
// hold the gleaner's epoch lock (shared), so no log space is freed while
// records are read.
#ifndef KVSTORE_PENDING_KEYS_H_
#define KVSTORE_PENDING_KEYS_H_

#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "kvstore/crl.h"

namespace kv {

class PendingKeys {
 public:
  explicit PendingKeys(uint32_t nlogs) : logs_(nlogs) {}

  // Records of log i from pos on were written by this session: their
  // kOpKeyIndexed flags hold. Before this call no flag is trusted.
  void trust_flags_from(uint32_t i, uint64_t pos);

  // Brings log i to [cursor, tail): forgets the runs whose records all lie
  // before cursor, reads the records it has not read yet up to tail from
  // `log`. A record that does not validate is corruption; what was read
  // before it stays, and the next call reads from it again.
  Status update(uint32_t i, const Log& log, const Limits& limits, uint64_t cursor, uint64_t tail);

  // Forgets log i's runs of records before cursor (each epoch, so that
  // keys read by a scan do not stay in DRAM until the next one).
  void forget(uint32_t i, uint64_t cursor);

  // Appends the first `max` keys past `after` (or at it, when inclusive)
  // and before end (empty: no end), sorted, each once; returns whether
  // there are more.
  bool collect(std::string_view after, bool inclusive, std::string_view end, size_t max,
               std::vector<std::string>* out) const;

  // Keys held, counting a key once per run that holds it (for tests).
  size_t held() const;

 private:
  // The distinct keys of a stretch of one log's records, sorted.
  struct Run {
    uint64_t end = 0;             // the log position past its last record
    std::string bytes;            // the keys, back to back
    std::vector<size_t> at{0};    // key i is bytes[at[i], at[i + 1])
    std::vector<uint64_t> first;  // key i's first 8 bytes as a number
    size_t size() const { return first.size(); }
    std::string_view key(size_t i) const {
      return std::string_view(bytes).substr(at[i], at[i + 1] - at[i]);
    }
    void add(std::string_view k);
    // The first key past k (or at it, when inclusive).
    size_t seek(std::string_view k, bool inclusive) const;
  };
  struct PerLog {
    uint64_t trusted = UINT64_MAX;  // flags hold in records from here on
    uint64_t end = 0;       // read up to here
    std::vector<Run> runs;  // oldest first; each one's end past the last's
  };
  static Run merge(const Run& older, const Run& newer);
  static void forget_before(PerLog& l, uint64_t cursor);
  static void add_run(PerLog& l, std::vector<std::string_view>* keys, uint64_t end);

  mutable std::mutex mu_;
  std::vector<PerLog> logs_;
};

}  // namespace kv

#endif  // KVSTORE_PENDING_KEYS_H_
