// KvModel: what a crash of a key-value store may leave, with several
// updates in flight (after RocksDB's db_stress ExpectedState, which marks
// in-flight writes "pending").
//
// The model keeps a base map (every update folded into it is durable) and
// the updates since, each with the position of its record in log order
// (learnt from the store's "kv.update.logging" mark) and whether it is
// acknowledged: kSync when it returned OK, kAsync once a sync() that began
// after it returned has returned OK. A crash may recover the base with every
// acknowledged update and any subset of the others that were logged, each
// whole (a transaction is one record), applied in log order.
//
// Thread safety: none. Scheduled actors call it one at a time.
#ifndef TESTS_CRASH_KV_MODEL_H_
#define TESTS_CRASH_KV_MODEL_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "pm/status.h"

namespace pm::crash {

using KvMap = std::map<std::string, std::string>;

uint64_t digest_of(const KvMap& m);

class KvModel {
 public:
  struct Change {
    std::string key;
    std::optional<std::string> value;  // nullopt: remove
  };

  // Starts from `base` (a new store, or what recovery found).
  void reset(KvMap base);

  // An update is about to run; returns its id.
  uint64_t begin(std::vector<Change> changes);
  // Its record is being written (the next in log order). The store leaves
  // out removes of keys it does not hold; so does the model.
  void logged(uint64_t id);
  // It returned `s`. `async`: acknowledged only by a later sync.
  void returned(uint64_t id, const Status& s, bool async);
  // A sync() starts; returns its ticket for synced().
  uint64_t sync_begins() { return clock_++; }
  // It returned OK: every update that returned before it began is durable.
  void synced(uint64_t ticket);

  // Digests of every state a crash may recover now (at most `cap`).
  std::vector<uint64_t> allowed(size_t cap) const;
  // Updates logged but not acknowledged.
  size_t uncertain() const;
  // The state with every logged update applied: what the store shows.
  KvMap visible() const;

 private:
  struct Update {
    std::vector<Change> changes;
    int64_t order = -1;  // log order; -1 while not logged
    bool done = false;   // returned
    bool acked = false;
    uint64_t returned_at = 0;
  };
  static void apply(const Update& u, KvMap* m);
  // Logged updates in log order.
  std::vector<const Update*> in_log_order() const;
  // Folds the acknowledged updates that precede every uncertain one.
  void fold();

  KvMap base_;
  std::map<uint64_t, Update> updates_;
  uint64_t next_id_ = 1;
  int64_t next_order_ = 0;
  uint64_t clock_ = 1;
};

}  // namespace pm::crash

#endif  // TESTS_CRASH_KV_MODEL_H_
