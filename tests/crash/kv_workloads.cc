#include "crash/kv_workloads.h"

#include <cstring>
#include <string>
#include <thread>

#include "crash/kv_model.h"
#include "crash/scheduler.h"
#include "kv/store.h"
#include "kvstore/store_impl.h"
#include "testutil/store_options.h"

namespace pm::crash {

kv::StoreOptions crash_store_options() {
  kv::StoreOptions o = test::small_store_options();  // the workload drives gleaning
  o.max_key_bytes = 32;
  return o;
}

Status on_new_thread(const std::function<Status()>& op) {
  Status s;
  std::thread t([&] { s = op(); });
  t.join();
  return s;
}

namespace {

// Keys: 40 one at a time; 12 for the concurrent rounds, so that updates in
// flight often share a key with one just acknowledged (write collapsing).
constexpr int kKeys = 40;
constexpr int kConcurrentKeys = 12;

enum class Shape {
  kSequential,  // one update (or maintenance step) at a time
  kConcurrent,  // rounds of actors under the scheduler
  kUniform,     // puts of one record size, synced now and then (kAsync)
  kFull,        // a backend that cannot grow: it fills, then space is freed
  kFullSmall,   // the same with values of tens of bytes, removed by hundreds
  kWide,        // transactions over runs of 500 ordered keys
};

// The wide workload: enough live keys that the ordered index splits its
// leaves and its root, then drops emptied leaves and collapses its root
// again (keys of 28 bytes: about 120 fill a 4 KiB leaf). Transactions put
// runs of up to 80 consecutive keys, or remove runs of up to 300 (a
// transaction fits one log record); phases of kWidePhaseSteps steps
// alternate between mostly putting and mostly removing, so that the tree
// grows and shrinks again.
constexpr int kWideKeys = 500;
constexpr int kWidePutRun = 80;
constexpr int kWideRemoveRun = 300;
constexpr uint64_t kWidePhaseSteps = 15;

// The full backend: a file that may hardly grow (SimPersist::set_file_limit),
// filled at setup with values of 1-2 KiB until this much of the heap is
// left; then puts of 2-4 KiB over kFullKeys keys fill it within a few dozen
// steps.
constexpr uint64_t kFullHeadroom = 16 << 10;
// Free space past the heap while filling (room for the superblock, less
// than the journal keeps past the heap, so growth cannot fit) and beyond
// the file while draining by the disk.
constexpr uint64_t kFullMarginBytes = 256 << 10;
constexpr uint64_t kFullSpareBytes = 2 << 20;
constexpr int kFullKeys = 400;
// Steps alternate between filling (mostly puts) and draining every this
// many steps. Draining phases alternate too: the first frees space by
// removes in the store alone; the next frees space on the disk (as if
// another file were removed) and runs no removes. Right after the disk has
// room, and at the end of a phase of removes, a put must go through: a
// store that never recovers from a full disk loses nothing, so only this
// check sees it (drained_actor).
constexpr uint64_t kFullPhaseSteps = 40;

// The full backend of small values: thousands of keys of 24-88 byte values
// (about the heap's megabyte), put and removed by transactions of runs, and
// gleaned without epochs while draining, so that checkpoints apply and
// purge the removes of thousands of keys at once, while the puts that
// found no room wait in the logs (their ghosts are newer than those puts,
// and wait to be purged until the puts are applied).
constexpr int kSmallPutRun = 64;
constexpr int kSmallRemoveRun = 300;

class KvWorkload final : public Workload {
 public:
  KvWorkload(bool async, Shape shape)
      : async_(async),
        concurrent_(shape == Shape::kConcurrent),
        uniform_(shape == Shape::kUniform),
        full_(shape == Shape::kFull || shape == Shape::kFullSmall),
        small_(shape == Shape::kFullSmall),
        wide_(shape == Shape::kWide),
        options_(crash_store_options()) {
    if (async) options_.durability = kv::Durability::kAsync;
    // The concurrent rounds run with the smallest DRAM budget: each epoch
    // evicts every clean item (gets then read the backend) and releases the
    // backend's private page copies, with updates and gets in flight.
    if (concurrent_) options_.dram_budget_bytes = 1;
    // Room in the logs for the removes of thousands of keys, so that the
    // epochs do not come from full logs.
    if (small_) options_.log_bytes = 512 << 10;
  }
  ~KvWorkload() override {
    if (full_) SimPersist::set_file_limit(0);
  }

  std::string name() const override {
    return std::string("kvstore") + (concurrent_ ? "_concurrent" : "") +
           (uniform_ ? "_uniform" : "") + (full_ ? "_full" : "") +
           (small_ ? "_small" : "") + (wide_ ? "_wide" : "") +
           (async_ ? "_async" : "");
  }
  Options options() const override { return kv::container_options(options_); }
  uint64_t schedules() const override { return schedules_; }

  // The harness reuses a workload for several runs (a dry run, then each
  // killed child): start from nothing.
  Status setup(Container& c, std::mt19937_64&) override {
    store_.reset();
    model_.reset({});
    small_keys_ = 0;
    attach(c);
    // A disk limit left by the previous run (the dry run ends in any phase).
    if (full_) SimPersist::set_file_limit(0);
    PM_TRY(kv::format_store(&c, options_));
    Status s = full_ ? fill(c) : Status();
    if (!s.ok()) store_.reset();  // the harness closes the container next
    return s;
  }

  Status resume(Container& c, CommitLog& log) override {
    store_.reset();
    attach(c);
    log_ = &log;
    if (full_) SimPersist::set_file_limit(c.info().file_bytes);
    PM_TRY(open_store(c));
    Result<KvMap> m = read_all(*store_);
    if (!m.ok()) {
      store_.reset();  // the harness closes the container next
      return m.status();
    }
    model_.reset(std::move(*m));
    // New small keys go past the ones recovered.
    auto last = model_.visible().lower_bound("t");
    if (small_ && last != model_.visible().begin() && (--last)->first.starts_with("s")) {
      small_keys_ = std::stoull(last->first.substr(1)) + 1;
    }
    return Status();
  }

  Status close(CommitLog&) override {
    store_.reset();  // a clean close: the destructor syncs (kAsync)
    return Status();
  }

  Status step(Container& c, std::mt19937_64& rng, CommitLog& log) override {
    log_ = &log;
    steps_++;
    error_ = Status();
    if (full_) set_free_space(c);
    if (store_ == nullptr) PM_TRY(reopen(c));  // a new session: state unchanged
    if (store_ == nullptr && full_ && drained_step()) {
      return Status::invalid_argument("kvstore_full: the store cannot be opened after " +
                                      draining());
    }
    if (store_ == nullptr) return Status();  // a full disk refused it: next step
    if (rng() % 25 == 0) {  // a clean close and reopen
      store_.reset();
      return reopen(c);
    }
    std::vector<std::function<void()>> actors;
    if (concurrent_) {
      plan_round(rng, &actors);
    } else if (full_ && steps_ % kFullPhaseSteps == 1 && steps_ > 1) {
      actors.push_back(filling() ? refill_actor(c) : quiesce_actor());
    } else if (full_ && drained_step()) {
      actors.push_back(drained_actor());
    } else {
      actors.push_back(sequential_actor(rng));
    }
    error_ = Status();
    actor_op_.assign(actors.size(), 0);
    Scheduler sched(rng(), [this](int actor, const char* name, sync_point::Kind kind) {
      observe(actor, name, kind);
    });
    sched.run(actors);
    schedules_ += concurrent_;
    // Every eighth step the live store is read by an ordered scan (the
    // index merged with what the logs hold unapplied) and must show what
    // the model does: a damaged index is seen at once, not only by the
    // digests of recovered stores.
    if (error_.ok() && steps_ % 8 == 0) {
      Result<KvMap> m = read_all(*store_);
      if (!m.ok()) return m.status();
      if (*m != model_.visible()) {
        return Status::invalid_argument("step " + std::to_string(steps_) +
                                        ": a scan of the live store differs from the model");
      }
    }
    if (full_ && steps_ == kFullPhaseSteps && no_space_ == 0 && error_.ok()) {
      // A guard on the workload itself: it must keep reaching what it is for.
      return Status::invalid_argument("kvstore_full: the backend never filled in the first " +
                                      std::to_string(kFullPhaseSteps) + " steps");
    }
    return error_;
  }

  // The live container: the model. A recovered one: open a store on it
  // (log replay) and read everything.
  uint64_t digest(Container& c) override {
    // (A later container may reuse the address: the generation tells.)
    if (&c == live_ && c.generation() == live_generation_) return digest_of(model_.visible());
    Result<std::unique_ptr<kv::Store>> s = kv::open_store_on(&c, options_);
    if (!s.ok()) return 0xbad0;
    Result<KvMap> m = read_all(**s);
    return m.ok() ? digest_of(*m) : 0xbad1;
  }

  Status write_probe(Container& c) override {
    Result<std::unique_ptr<kv::Store>> s = kv::open_store_on(&c, options_);
    if (!s.ok()) return s.status();
    // A full backend may refuse the put and the checkpoint (its logs may
    // hold what it has no room for); a remove of one of its keys must go
    // through whatever it holds.
    if (full_) return probe_full(**s);
    PM_TRY((*s)->put("probe", "written after recovery"));
    PM_TRY((*s)->sync());
    return (*s)->checkpoint();
  }

 private:
  // The full backend's setup: keys with values of 1-2 KiB until
  // kFullHeadroom of the heap is left (beyond kFullKeys, ballast keys the
  // steps never touch); the first step fills the disk. Full, its gleans
  // block on records the heap has no room for and apply what fits behind
  // them, puts are refused with kNoSpace while removes go through (the
  // logs' reserve), and everything works again once removes free space.
  Status fill(Container& c) {
    PM_TRY(open_store(c));
    std::mt19937_64 rng(c.info().file_bytes);
    // Small values leave room in the pages of several size classes while
    // one of them needs a new page: the heap would grow before the free
    // bytes fell to the headroom. The disk is full from the start instead.
    if (small_) {
      const ContainerInfo i = c.info();
      SimPersist::set_file_limit(i.raw_bytes + i.heap_bytes + kFullMarginBytes);
    }
    for (int i = 0; c.usage().free_bytes > kFullHeadroom; i++) {
      if (small_) {
        auto t = store_->begin();
        for (int j = 0; j < kSmallPutRun; j++) {
          PM_TRY(t->put(small_key(), small_value(rng)));
        }
        Status st = t->commit();
        if (st.ok()) st = store_->checkpoint();
        if (st.code() == Code::kNoSpace) break;
        PM_TRY(st);
        continue;
      }
      std::string v(1024 + rng() % 1024, static_cast<char>('a' + i % 26));
      PM_TRY(store_->put((i < kFullKeys ? "key" : "ballast") + std::to_string(i), v));
      if (i % 8 == 7) PM_TRY(store_->checkpoint());
    }
    if (!small_) PM_TRY(store_->checkpoint());
    Result<KvMap> m = read_all(*store_);
    if (!m.ok()) return m.status();
    model_.reset(std::move(*m));
    return Status();
  }

  Status probe_full(kv::Store& s) {
    std::string first;
    PM_TRY(s.scan("", [&](std::string_view k, std::string_view) {
      first = k;
      return false;
    }));
    if (!first.empty()) {
      PM_TRY(s.remove(first));
      PM_TRY(s.sync());
    }
    Status p = s.put("probe", "written after recovery");
    if (p.ok()) p = s.checkpoint();
    return p.code() == Code::kNoSpace ? Status() : p;
  }

  void attach(Container& c) {
    live_ = &c;
    live_generation_ = c.generation();
  }

  // An open on a full disk may need room it cannot get (a commit that must
  // grow the journal): kNoSpace, and the store stays closed.
  Status reopen(Container& c) {
    Status s = open_store(c);
    note(s);
    return error_;
  }

  bool filling() const { return (steps_ / kFullPhaseSteps) % 2 == 0; }
  bool draining_by_disk() const { return (steps_ / kFullPhaseSteps) % 4 == 3; }
  std::string draining() const {
    return draining_by_disk() ? "space was freed on the disk" : "a phase of removes";
  }
  // Where a draining phase must have made room again: right after the disk
  // got room, or at the end of a phase of removes.
  bool drained_step() const {
    if (filling()) return false;
    const uint64_t at = steps_ % kFullPhaseSteps;
    return draining_by_disk() ? at == 2 : at == kFullPhaseSteps - 1;
  }

  // At each phase's start. Filling: no file may end more than
  // kFullMarginBytes past the heap, which is less than the journal's room
  // past it, so the heap cannot grow (growth keeps the journal's room).
  // Draining by the disk: room for two more megabytes, after the phase's
  // first step (quiesce_actor). Draining by removes: the limit stays.
  void set_free_space(Container& c) {
    const ContainerInfo i = c.info();
    if (steps_ % kFullPhaseSteps == 1 && filling()) {
      SimPersist::set_file_limit(i.raw_bytes + i.heap_bytes + kFullMarginBytes);
    } else if (steps_ % kFullPhaseSteps == 2 && draining_by_disk()) {
      SimPersist::set_file_limit(i.file_bytes + kFullSpareBytes);
    }
  }

  // A filling phase after a draining one starts by filling the heap's free
  // space with keys the steps never touch (puts alone over kFullKeys keys
  // cannot fill a heap that grew), a checkpoint after every eight.
  std::function<void()> refill_actor(Container& c) {
    return [this, &c] {
      for (int i = 0; error_.ok() && c.usage().free_bytes > kFullHeadroom; i++) {
        const uint64_t before = no_space_;
        if (small_) {
          small_puts_actor()();
          note(store_->checkpoint());
          if (no_space_ != before) return;
          continue;
        }
        const std::string k = "refill" + std::to_string(++values_);
        std::string v = std::to_string(values_) + ":";
        v.resize(options_.max_value_bytes, 'b');
        run_update({{k, v}}, [&] { return store_->put(k, v); }, false);
        if (i % 8 == 7) note(store_->checkpoint());
        if (no_space_ != before) return;
      }
    };
  }

  // Draining by the disk starts with checkpoints on the full disk: once
  // what fits is applied, epochs have nothing to commit while the gleaner
  // waits for room, so only the space freed on the disk can help.
  std::function<void()> quiesce_actor() {
    return [this] {
      for (int i = 0; i < 3; i++) note(store_->checkpoint());
    };
  }

  // With room again a put goes through, and once the disk has room a
  // checkpoint applies everything that waited. (Removes may leave a
  // blocked record waiting: the room they free may be in other size
  // classes.) Growth that took the journal's room, or that waited for a
  // commit, left a store refusing every put however much was freed.
  std::function<void()> drained_actor() {
    return [this] {
      Status cp = store_->checkpoint();
      note(cp);
      // Removes in the store free what they held, but not necessarily in
      // the size classes a blocked record needs; small values all fit.
      if (!draining_by_disk() && !small_ && cp.code() == Code::kNoSpace) cp = Status();
      Status put;
      const std::string k = "key0", v = std::to_string(++values_) + ":drained";
      run_update({{k, v}}, [&] { return put = store_->put(k, v); }, false);
      const Status& s = cp.code() == Code::kNoSpace ? cp : put;
      if (s.code() == Code::kNoSpace && error_.ok()) {
        error_ = Status::invalid_argument("kvstore_full: no room after " + draining() + ": " +
                                          s.to_string());
      }
    };
  }

  Status open_store(Container& c) {
    Result<std::unique_ptr<kv::Store>> s = kv::open_store_on(&c, options_);
    if (!s.ok()) return s.status();
    store_ = std::move(*s);
    return Status();
  }

  // Every key by an ordered scan (the backend's index merged with the
  // logs), which must come in order and each once.
  static Result<KvMap> read_all(kv::Store& s) {
    KvMap m;
    bool ordered = true;
    Status st = s.scan("", [&](std::string_view k, std::string_view v) {
      ordered &= m.empty() || k > m.rbegin()->first;
      m.emplace(k, v);
      return true;
    });
    if (!st.ok()) return st;
    if (!ordered) return Status::corruption("a scan returned keys out of order or twice");
    return m;
  }

  void publish() {
    if (log_ != nullptr) log_->expect(model_.allowed(kMaxAllowed));
  }

  void observe(int actor, const char* name, sync_point::Kind kind) {
    if (kind != sync_point::Kind::kMark || std::strcmp(name, "kv.update.logging") != 0) return;
    if (actor < 0 || actor_op_[actor] == 0) return;
    model_.logged(actor_op_[actor]);
    publish();
  }

  // A full backend refuses with kNoSpace: expected, and counted.
  void note(const Status& s) {
    if (full_ && s.code() == Code::kNoSpace) {
      no_space_++;
      return;
    }
    if (!s.ok() && error_.ok()) error_ = s;
  }

  std::string key(std::mt19937_64& rng) {
    if (wide_) return wide_key(static_cast<int>(rng() % kWideKeys));
    const int keys = concurrent_ ? kConcurrentKeys : full_ ? kFullKeys : kKeys;
    return "key" + std::to_string(rng() % keys);
  }
  static std::string wide_key(int i) {
    char k[32];
    std::snprintf(k, sizeof k, "w%05d......................", i);  // 28 bytes
    return k;
  }

  // Values of a few sizes (so that records of later sessions line up with
  // stale ones of earlier sessions) or any size, each unique.
  std::string value(std::mt19937_64& rng, size_t max) {
    static constexpr size_t kSizes[] = {16, 200, 600, 1200};
    size_t n = rng() % 2 ? kSizes[rng() % 4] : 8 + rng() % max;
    std::string v = std::to_string(++values_) + ":";
    v.resize(std::max(n, v.size()), static_cast<char>('a' + rng() % 26));
    return v;
  }

  // An update by the running actor: registered with the model, run,
  // reported back (the model learns its log position from the mark).
  void run_update(std::vector<KvModel::Change> changes, const std::function<Status()>& op,
                  bool single_remove) {
    const uint64_t id = model_.begin(std::move(changes));
    actor_op_[Scheduler::current()] = id;
    Status s = op();
    if (single_remove && s.is_not_found()) s = Status();  // nothing logged
    model_.returned(id, s, async_);
    actor_op_[Scheduler::current()] = 0;
    publish();
    note(s);
  }

  std::function<void()> put_actor(std::string k, std::string v) {
    return [this, k, v] {
      run_update({{k, v}}, [&] { return store_->put(k, v); }, false);
    };
  }

  std::function<void()> remove_actor(std::string k) {
    return [this, k] {
      run_update({{k, std::nullopt}}, [&] { return store_->remove(k); }, true);
    };
  }

  std::function<void()> txn_actor(std::mt19937_64& rng) {
    std::vector<KvModel::Change> changes;
    for (int i = 0, n = 2 + static_cast<int>(rng() % 3); i < n; i++) {
      if (rng() % 3 == 0) {
        changes.push_back({key(rng), std::nullopt});
      } else {
        changes.push_back({key(rng), value(rng, 500)});
      }
    }
    return transaction_actor(std::move(changes));
  }

  // The changes in one transaction, acknowledged at its commit.
  std::function<void()> transaction_actor(std::vector<KvModel::Change> changes) {
    return [this, changes] {
      auto t = store_->begin();
      for (const KvModel::Change& c : changes) {
        Status s = c.value ? t->put(c.key, *c.value) : t->remove(c.key);
        if (!s.ok()) return note(s);
      }
      run_update(changes, [&] { return t->commit(); }, false);
    };
  }

  std::function<void()> sync_actor() {
    return [this] {
      const uint64_t ticket = model_.sync_begins();
      Status s = store_->sync();
      if (s.ok()) model_.synced(ticket);
      publish();
      note(s);
    };
  }

  std::function<void()> glean_actor(uint64_t n, bool epoch) {
    return [this, n, epoch] {
      Result<uint64_t> g = store_->glean(n);
      note(g.status());
      // A glean that found no room still lets the epoch free what removes
      // applied.
      if (epoch && (g.ok() || g.status().code() == Code::kNoSpace)) note(store_->advance_epoch());
    };
  }

  std::function<void()> checkpoint_actor() {
    return [this] { note(store_->checkpoint()); };
  }

  std::function<void()> update_actor(std::mt19937_64& rng) {
    const int kind = static_cast<int>(rng() % 15);
    if (kind < 10) return put_actor(key(rng), value(rng, 2000));
    if (kind < 13) return remove_actor(key(rng));
    return txn_actor(rng);
  }

  // One step of the sequential workloads: an update (then a sync when
  // kAsync), some gleaning, or a checkpoint.
  std::function<void()> sequential_actor(std::mt19937_64& rng) {
    const int kind = static_cast<int>(rng() % 20);
    if (full_) return full_actor(rng, kind);
    if (wide_) return wide_actor(rng, kind);
    if (kind < 15 && uniform_) {
      // Every record the same size: records of a later session line up
      // with stale ones an earlier session left beyond a torn record. Syncs
      // now and then, so that a power failure finds several unsynced.
      std::string v = std::to_string(++values_) + ":";
      v.resize(600, 'u');
      std::function<void()> up = put_actor(key(rng), v);
      if (rng() % 3 != 0 && model_.uncertain() < 5) return up;
      return [this, up, sync = sync_actor()] {
        up();
        if (error_.ok()) sync();
      };
    }
    if (kind < 15) {
      std::function<void()> up = update_actor(rng);
      if (!async_) return up;
      return [this, up, sync = sync_actor()] {
        up();
        if (error_.ok()) sync();
      };
    }
    if (kind < 19) return glean_actor(rng() % 6, rng() % 2 == 0);
    return checkpoint_actor();
  }

  // The wide workload: runs of puts and of removes, in one transaction
  // each (puts mostly while growing, removes mostly while shrinking);
  // single updates; gleaning in two steps of five, with an epoch or not
  // (with fewer, a key was put and removed within the logs and the index
  // never grew or shrank); checkpoints.
  std::function<void()> wide_actor(std::mt19937_64& rng, int kind) {
    if (kind < 10) {
      const bool growing = (steps_ / kWidePhaseSteps) % 2 == 0;
      const bool puts = growing ? kind < 8 : kind < 2;
      const int first = static_cast<int>(rng() % kWideKeys);
      const int n = 1 + static_cast<int>(rng() % (puts ? kWidePutRun : kWideRemoveRun));
      std::vector<KvModel::Change> changes;
      for (int i = first; i < std::min(first + n, kWideKeys); i++) {
        if (puts) {
          changes.push_back({wide_key(i), std::to_string(++values_)});
        } else {
          changes.push_back({wide_key(i), std::nullopt});
        }
      }
      return transaction_actor(std::move(changes));
    }
    if (kind < 11) return update_actor(rng);
    if (kind < 19) return glean_actor(1 + rng() % 4, rng() % 2 == 0);
    return checkpoint_actor();
  }

  // The full backend: mostly puts of 2-4 KiB while filling, removes while
  // draining by removes, gleans while draining by the disk (no removes,
  // whose purge would make every epoch commit); gleaning (mostly with an
  // epoch) and checkpoints in all.
  std::function<void()> full_actor(std::mt19937_64& rng, int kind) {
    if (kind < 14 && !filling() && kind >= 3 && draining_by_disk()) kind = 14;
    if (small_) return full_small_actor(rng, kind);
    if (kind < 14) {
      if (filling() ? kind < 13 : kind < 3) {
        std::string v = std::to_string(++values_) + ":";
        v.resize(2048 + rng() % 2048, static_cast<char>('a' + rng() % 26));
        // Half of them new keys: overwrites alone free as much as they take.
        const bool fresh = filling() && rng() % 2 == 0;
        return put_actor(fresh ? "fill" + std::to_string(values_) : key(rng), v);
      }
      return remove_actor(key(rng));
    }
    if (kind < 19) return glean_actor(1 + rng() % 8, rng() % 3 != 0);
    return checkpoint_actor();
  }

  // The full backend of small values: while filling, runs of puts of new
  // keys; while draining by removes, runs of removes of consecutive keys
  // (put together, so they free whole pages, which the ordered index's
  // splits need),
  // with gleans that apply them but take no epoch, so that they pile
  // up in the epoch; gleans (with an epoch or not) and checkpoints.
  std::function<void()> full_small_actor(std::mt19937_64& rng, int kind) {
    if (kind < 10 && filling()) return small_puts_actor();
    if (kind < 10 && !draining_by_disk()) {
      std::vector<KvModel::Change> changes;
      const KvMap& held = model_.visible();
      for (auto it = held.lower_bound(small_key_at(rng() % (small_keys_ + 1)));
           it != held.end() && it->first.starts_with("s") && changes.size() < kSmallRemoveRun;
           ++it) {
        changes.push_back({it->first, std::nullopt});
      }
      if (changes.empty()) return checkpoint_actor();
      return transaction_actor(std::move(changes));
    }
    const bool removing = !filling() && !draining_by_disk();
    if (kind < 17) return glean_actor(1 + rng() % 8, !removing && rng() % 3 != 0);
    return checkpoint_actor();
  }

  std::function<void()> small_puts_actor() {
    std::vector<KvModel::Change> changes;
    std::mt19937_64 rng(values_);
    for (int j = 0; j < kSmallPutRun; j++) changes.push_back({small_key(), small_value(rng)});
    return transaction_actor(std::move(changes));
  }
  std::string small_key() { return small_key_at(small_keys_++); }
  static std::string small_key_at(uint64_t i) {
    char k[24];
    std::snprintf(k, sizeof k, "s%07llu", static_cast<unsigned long long>(i));
    return k;
  }
  std::string small_value(std::mt19937_64& rng) {
    std::string v = std::to_string(++values_) + ":";
    v.resize(24 + rng() % 64, static_cast<char>('a' + rng() % 26));
    return v;
  }

  // One round of the concurrent workloads: one to three updates and up to
  // two background actors. Under kAsync a sync comes often enough that at
  // most a few updates are uncertain (the model enumerates their subsets).
  void plan_round(std::mt19937_64& rng, std::vector<std::function<void()>>* actors) {
    if (async_ && model_.uncertain() >= 5) {
      actors->push_back(sync_actor());
      return;
    }
    const int updates = 1 + static_cast<int>(rng() % 3);
    for (int i = 0; i < updates; i++) actors->push_back(update_actor(rng));
    const int background = static_cast<int>(rng() % 3);
    for (int i = 0; i < background; i++) {
      switch (rng() % 5) {
        case 0:
        case 1:
          actors->push_back(glean_actor(1 + rng() % 6, rng() % 2 == 0));
          break;
        case 2:
          actors->push_back(glean_actor(0, true));  // an epoch alone
          break;
        case 3:
          actors->push_back(sync_actor());
          break;
        default:
          actors->push_back(checkpoint_actor());
      }
    }
  }

  const bool async_, concurrent_, uniform_, full_, small_, wide_;
  kv::StoreOptions options_;
  Container* live_ = nullptr;
  uint64_t live_generation_ = 0;
  std::unique_ptr<kv::Store> store_;
  KvModel model_;
  CommitLog* log_ = nullptr;
  std::vector<uint64_t> actor_op_;  // the update each actor runs (0: none)
  Status error_;
  uint64_t values_ = 0;
  uint64_t schedules_ = 0;
  uint64_t steps_ = 0;
  uint64_t no_space_ = 0;  // kNoSpace answers (full backend)
  uint64_t small_keys_ = 0;  // small keys made so far (each new)
};

}  // namespace

std::unique_ptr<Workload> make_kv_workload() {
  return std::make_unique<KvWorkload>(false, Shape::kSequential);
}
std::unique_ptr<Workload> make_kv_async_workload() {
  return std::make_unique<KvWorkload>(true, Shape::kSequential);
}
std::unique_ptr<Workload> make_kv_concurrent_workload() {
  return std::make_unique<KvWorkload>(false, Shape::kConcurrent);
}
std::unique_ptr<Workload> make_kv_concurrent_async_workload() {
  return std::make_unique<KvWorkload>(true, Shape::kConcurrent);
}
std::unique_ptr<Workload> make_kv_uniform_async_workload() {
  return std::make_unique<KvWorkload>(true, Shape::kUniform);
}
std::unique_ptr<Workload> make_kv_full_workload() {
  return std::make_unique<KvWorkload>(false, Shape::kFull);
}
std::unique_ptr<Workload> make_kv_full_small_workload() {
  return std::make_unique<KvWorkload>(false, Shape::kFullSmall);
}
std::unique_ptr<Workload> make_kv_wide_workload() {
  return std::make_unique<KvWorkload>(false, Shape::kWide);
}

}  // namespace pm::crash
