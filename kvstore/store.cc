#include <malloc.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <new>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "kvstore/planted_bugs.h"
#include "kvstore/recovery.h"
#include "kvstore/store_impl.h"
#include "libpm/c_guard.h"
#include "libpm/sync_point.h"

namespace kv {

KvPlantedBugs g_kv_planted_bugs;

namespace {

// Private copies of committed backend pages an epoch keeps (gleaner.h):
// the DRAM budget; without one, no bound. (A default bound of 1 GiB was
// taken out: the container's count of private pages is an upper bound
// between merges of its run list, so a store committing the same pages
// epoch after epoch could pass it and release everything again and again.)
uint64_t private_budget(const StoreOptions& o) { return o.dram_budget_bytes; }

constexpr const char* kLayout = pm::Options::kKvStoreLayout;
constexpr uint64_t kMinLogBytes = 64 << 10;

uint64_t now_us() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

}  // namespace

// ---------------------------------------------------------------- options

// The public limit is the persistent root's array size.
static_assert(StoreOptions::kMaxLogs == static_cast<int>(kMaxLogs));

Status check_store_options(const StoreOptions& o) {
  if (o.logs < 1 || o.logs > static_cast<int>(kMaxLogs)) {
    return Status::invalid_argument("logs must be 1.." + std::to_string(kMaxLogs));
  }
  if (o.log_bytes < kMinLogBytes || o.log_bytes % 4096 != 0) {
    return Status::invalid_argument("log_bytes must be a multiple of 4 KiB, at least 64 KiB");
  }
  if (o.log_bytes > (16ull << 30) / static_cast<uint64_t>(o.logs)) {  // no product: it could wrap
    return Status::invalid_argument("logs * log_bytes (" + std::to_string(o.logs) + " * " +
                                    std::to_string(o.log_bytes) + ") must be at most 16 GiB");
  }
  if (o.max_key_bytes < 1 || o.max_key_bytes > 65535) {
    return Status::invalid_argument("max_key_bytes must be 1..65535");
  }
  if (uint64_t{o.max_value_bytes} + o.max_key_bytes + 128 > o.log_bytes / 4) {
    // A record holds the value, the key and 128 bytes of headers.
    const int64_t most = static_cast<int64_t>(o.log_bytes / 4) - o.max_key_bytes - 128;
    return Status::invalid_argument(
        "max_value_bytes (" + std::to_string(o.max_value_bytes) + ") is too large for logs of " +
        std::to_string(o.log_bytes) + " bytes: a record (the value, a key of up to " +
        std::to_string(o.max_key_bytes) + " bytes and 128 bytes of headers) must fit in a "
        "quarter of a log, so at most " + std::to_string(std::max<int64_t>(most, 0)) +
        " here; use larger logs or a smaller value limit");
  }
  if (o.min_gleaners < 0 || o.max_gleaners < std::max(o.min_gleaners, 1) || o.max_gleaners > 64) {
    return Status::invalid_argument("gleaners: need 0 <= min_gleaners <= max_gleaners <= 64, max >= 1");
  }
  return Status();
}

pm::Options container_options(const StoreOptions& o) {
  pm::Options co;
  co.initial_size = o.initial_heap_bytes;
  co.max_size = o.max_heap_bytes;
  co.raw_bytes = o.log_bytes * static_cast<uint64_t>(o.logs);
  co.layout = kLayout;
  co.tracker = o.tracker;
  co.logger = o.logger;
  co.read_only = o.read_only;
  return co;
}

Status format_store(pm::Container* c, const StoreOptions& o) {
  PM_TRY(check_store_options(o));
  Geometry g;
  g.nlogs = static_cast<uint32_t>(o.logs);
  g.log_bytes = o.log_bytes;
  g.max_key = o.max_key_bytes;
  g.max_value = o.max_value_bytes;
  g.ordered = o.ordered;
  if (c->raw().size() < g.log_bytes * g.nlogs) {
    return Status::invalid_argument("the container's raw region is smaller than the logs");
  }
  Result<std::unique_ptr<Backend>> b = Backend::create(c, g);
  return b.status();
}

namespace {

// A store on container c (owned, or the caller's): recovery, then the
// background threads. Out of memory is kNoSpace, not an exception (the
// frontend's table and the recovered items are DRAM).
Result<std::unique_ptr<Store>> start_store(pm::Container* c, std::unique_ptr<pm::Container> owned,
                                           const StoreOptions& o, const std::string& path = "") {
  try {
    auto s = std::make_unique<StoreImpl>(c, std::move(owned), o, path);
    PM_TRY(s->recover());
    PM_TRY(s->start_threads());
    return std::unique_ptr<Store>(std::move(s));
  } catch (const std::bad_alloc&) {
    return Status::no_space("out of memory (DRAM) for the store's tables; nothing is lost");
  }
}

}  // namespace

Result<std::unique_ptr<Store>> open_store_on(pm::Container* c, const StoreOptions& o) {
  return start_store(c, nullptr, o);
}

Result<std::unique_ptr<Store>> Store::open(const std::string& path, const StoreOptions& o) {
  struct stat st;
  const bool exists = ::stat(path.c_str(), &st) == 0;
  // Only a path that is not there is a store to create; any other failure
  // to look (a symlink loop, a directory not searchable) is the answer.
  if (!exists && errno != ENOENT) return Status::from_errno("open " + path, errno);
  // The geometry of an existing store is the one it was created with.
  StoreOptions checked = o;
  if (exists) {
    checked.logs = 1, checked.log_bytes = 1 << 20;
    checked.max_key_bytes = 64, checked.max_value_bytes = 1024;
  }
  PM_TRY(check_store_options(checked).with_context("open " + path));
  pm::Options co = container_options(o);
  std::unique_ptr<pm::Container> c;
  if (!exists) {
    if (!o.create_if_missing || o.read_only) {
      return Status::not_found(path + ": no such store" +
                               (o.read_only ? " (opening read-only)" : " (create_if_missing is off)"));
    }
    // Formatted before it appears at the path: a crash leaves no file, or
    // a whole store (Options::initialize).
    co.initialize = [&o](pm::Container& k) { return format_store(&k, o); };
    Result<std::unique_ptr<pm::Container>> r = pm::Container::create(path, co);
    if (r.ok()) {
      c = std::move(*r);
    } else if (::stat(path.c_str(), &st) != 0) {  // not created by someone else meanwhile
      return r.status().with_context("create " + path);
    }
    co.initialize = nullptr;
  }
  if (c == nullptr) {
    Result<std::unique_ptr<pm::Container>> r = pm::Container::open(path, co);
    if (!r.ok()) return r.status().with_context("open " + path);
    c = std::move(*r);
  }
  pm::Container* raw = c.get();
  Result<std::unique_ptr<Store>> s = start_store(raw, std::move(c), o, path);
  if (!s.ok()) return s.status().with_context("open " + path);
  return s;
}

// ---------------------------------------------------------------- open and close

StoreImpl::StoreImpl(pm::Container* c, std::unique_ptr<pm::Container> owned,
                     const StoreOptions& o, const std::string& path)
    : c_(c),
      owned_(std::move(owned)),
      o_(o),
      stop_(o.logger, path),
      fe_(1 << 16) {}

StoreImpl::~StoreImpl() {
  if (pm::FileLock::forks() != forks_at_open_) {
    // Closed in a child of the process that opened it: the background
    // threads are the parent's (a child has only the thread that forked),
    // and so is the store. Their handles are let go unjoined (joining one
    // crashed), and nothing is written: the container's own close does
    // nothing either. Held where a leak check sees them as reachable.
    static auto* orphans = new std::vector<std::thread>;
    if (maintenance_.joinable()) orphans->push_back(std::move(maintenance_));
    for (std::thread& t : gleaners_) orphans->push_back(std::move(t));
    return;
  }
  stopping_ = true;
  bell_.ring();
  if (maintenance_.joinable()) maintenance_.join();
  for (std::thread& t : gleaners_) t.join();
  // A clean end: what the logs hold is durable, and a close mark behind it
  // says so to the next open (recovery.h: damage, not a crash, when records
  // before a mark do not read).
  if (logs_ != nullptr && session_ != 0 && !o_.read_only && !stop_.stopped()) {
    (void)logs_->mark_closed(session_);  // session_: set once recovery completed
  }
  // A borrowed container (open_store_on) outlives the store: what the
  // gleaners applied since the last epoch goes, as it goes when the file
  // closes, so that the next store on it starts from the committed state
  // (the crash harness's clean reopens found the ghost count of the
  // committed root against a ghost list that had grown since).
  if (owned_ == nullptr && !o_.read_only) (void)c_->abort();
}

Status StoreImpl::recover() {
  const uint64_t t0 = now_us();
  Result<std::unique_ptr<Backend>> b = Backend::attach(c_);
  if (!b.ok()) return b.status();
  be_ = std::move(*b);
  PM_TRY(be_->index_status());
  const BackendRoot* r = be_->root();
  pmem_ = c_->info().is_pmem;
  durability_ = o_.read_only ? Durability::kSync : o_.durability;  // read-only: nothing to sync
  if (durability_ == Durability::kSyncOnPmem) {
    durability_ = pmem_ ? Durability::kSync : Durability::kAsync;
  }
  limits_.max_key = r->max_key;
  limits_.max_value = r->max_value;
  limits_.max_record = r->log_bytes / 4;
  logs_ = std::make_unique<LogWriter>(c_, r->nlogs, r->log_bytes, persist_each(), &stop_,
                                      o_.emulate_persist_ns);
  gleaner_ = std::make_unique<Gleaner>(Gleaner::Env{c_, be_.get(), &fe_, logs_.get(), &stop_, &n_,
                                                    &next_seq_, limits_, o_.emulate_read_ns,
                                                    o_.emulate_persist_ns, private_budget(o_)});
  // The records not yet applied are rebuilt in DRAM (an item each): out of
  // memory, the open fails and the file keeps them for the next one.
  auto replay = [&]() -> Result<Recovered> {
    try {
      return kv::recover(c_, be_.get(), &fe_, logs_.get(), gleaner_.get(), limits_, o_.read_only);
    } catch (const std::bad_alloc&) {
      return Status::no_space(
          "out of memory (DRAM) rebuilding the updates its logs hold that were not yet applied; "
          "nothing is lost: open it again with more memory");
    }
  };
  Result<Recovered> rec = replay();
  if (!rec.ok()) return rec.status();
  session_ = rec->session;
  next_seq_ = rec->next_seq;
  if (!o_.read_only) gleaner_->trust_index_flags();
  n_.recovered_records = rec->records;
  n_.recovery_us = now_us() - t0;
  if (o_.logger) {
    o_.logger(pm::LogLevel::kInfo, "kvstore: replayed " + std::to_string(rec->records) +
                                       " log records (" + std::to_string(rec->keys) +
                                       " keys) in " + std::to_string(n_.recovery_us) + " us");
  }
  return Status();
}

// ---------------------------------------------------------------- reads

Status StoreImpl::check_sizes(std::string_view key, std::string_view value) const {
  if (key.empty()) return Status::invalid_argument("empty key");
  if (key.size() > limits_.max_key) {
    return Status::invalid_argument("key of " + std::to_string(key.size()) +
                                    " bytes is over the limit of " +
                                    std::to_string(limits_.max_key));
  }
  if (value.size() > limits_.max_value) {
    return Status::invalid_argument("value of " + std::to_string(value.size()) +
                                    " bytes is over the limit of " +
                                    std::to_string(limits_.max_value));
  }
  return Status();
}

Status StoreImpl::get(std::string_view key, std::string* value) {
  return pm::status_of([&] { return get_unguarded(key, value); });
}

Status StoreImpl::get_unguarded(std::string_view key, std::string* value) {
  n_.add(Counter::kGets);
  if (key.empty() || key.size() > limits_.max_key) return Status::not_found("no such key");
  const uint64_t h = hash_key(key);
  bool tomb = false;
  {
    Reclaimer::Guard g;
    bool hit = fe_.read(key, h, [&](const Item& it) {
      tomb = it.tombstone;
      if (!tomb && value != nullptr) value->assign(it.value());
    });
    if (hit) return tomb ? Status::not_found("no such key") : Status();
  }
  bool found = false;
  PM_TRY(miss(key, h, value, &found));
  return found ? Status() : Status::not_found("no such key");
}

Result<bool> StoreImpl::contains(std::string_view key) {
  Status s = get(key, nullptr);
  if (s.ok()) return true;
  if (s.is_not_found()) return false;
  return s;
}

Status StoreImpl::miss(std::string_view key, uint64_t h, std::string* value, bool* found,
                       bool install, uint64_t* seq) {
  n_.add(Counter::kMisses);
  Frontend::Locked lk(&fe_, h);
  if (const Item* it = lk.find(key, h)) {  // installed meanwhile
    *found = !it->tombstone;
    if (*found && value != nullptr) value->assign(it->value());
    if (seq != nullptr) *seq = it->seq;
    return Status();
  }
  std::string v;
  Result<Backend::Found> f = be_->get(key, h, &v);
  if (!f.ok()) return f.status();
  emulate_delay(o_.emulate_read_ns);
  *found = f->present;
  if (seq != nullptr) *seq = f->seq;
  if (!f->present) return Status();
  if (install && (o_.dram_budget_bytes == 0 || fe_.bytes() < o_.dram_budget_bytes)) {
    Item* it = Item::make(h, f->seq, 0, key, v, false);
    it->applied_epoch.store(1);  // the backend holds it: clean
    lk.replace(nullptr, it);
  }
  if (value != nullptr) *value = std::move(v);
  return Status();
}

// ---------------------------------------------------------------- updates

Status StoreImpl::put(std::string_view key, std::string_view value) {
  PM_TRY(check_sizes(key, value));
  return pm::status_of([&] {
    thread_local std::vector<Update> ups(1);
    ups.assign(1, {false, key, value, hash_key(key)});
    return update(ups, true);
  });
}

Status StoreImpl::remove(std::string_view key) {
  if (key.empty() || key.size() > limits_.max_key) return Status::not_found("no such key");
  return pm::status_of([&] {
    thread_local std::vector<Update> ups(1);
    ups.assign(1, {true, key, {}, hash_key(key)});
    return update(ups, true);
  });
}

Status Transaction::put(std::string_view key, std::string_view value) {
  return pm::status_of([&] {
    ops_.push_back({false, std::string(key), std::string(value)});
    return Status();
  });
}

Status Transaction::remove(std::string_view key) {
  return pm::status_of([&] {
    ops_.push_back({true, std::string(key), {}});
    return Status();
  });
}

Status Transaction::commit() {
  Status s = ops_.empty() ? Status() : pm::status_of([&] { return store_->apply_batch(ops_); });
  ops_.clear();
  return s;
}

Status StoreImpl::apply_batch(std::vector<TxnOp>& ops) {
  // Later operations on a key replace earlier ones of the same group.
  std::unordered_map<std::string_view, size_t> last;
  for (size_t i = 0; i < ops.size(); i++) {
    if (!ops[i].remove) PM_TRY(check_sizes(ops[i].key, ops[i].value));
    if (ops[i].remove && (ops[i].key.empty() || ops[i].key.size() > limits_.max_key)) {
      continue;  // cannot exist
    }
    last[ops[i].key] = i;
  }
  std::vector<Update> ups;
  for (size_t i = 0; i < ops.size(); i++) {
    auto it = last.find(ops[i].key);
    if (it == last.end() || it->second != i) continue;
    ups.push_back({ops[i].remove, ops[i].key, ops[i].value, hash_key(ops[i].key)});
  }
  if (ups.empty()) return Status();
  std::unique_lock<std::mutex> l(txn_mu_, std::defer_lock);
  pm::sync_point::acquire(l, "kv.txn.lock");
  return update(ups, false);
}

Result<LogState*> StoreImpl::log_for(uint64_t n, uint64_t put_bytes, bool removes) {
  // The last sixteenth of each log is kept for records that remove (and put
  // little beside): when the backend is full and the logs hold puts it has
  // no room for, a remove must still be logged, since applying it (the
  // gleaner applies past the blocked puts) is what frees the room. Small
  // puts once could use it too, and a mount that created many small files
  // used it up: then not even `rm` went through.
  const bool small = put_bytes <= kSmallRecordPutBytes;
  const bool reserve = small && (removes || g_kv_planted_bugs.reserve_for_small_puts);
  const uint64_t keep = reserve ? 0 : limits_.max_record / 4;
  bool full_retried = false;
  for (;;) {
    bool busy = false;
    LogState* L = logs_->acquire(n, keep, &busy);
    if (L != nullptr) return L;
    if (busy) {
      pm::sync_point::spin("kv.update.log_busy");
      continue;
    }
    // Every log is full: glean and end an epoch here (back-pressure).
    n_.add(Counter::kWriterWaits);
    bell_.ring();
    Result<uint64_t> g = stop_.or_stop("glean", [&] { return gleaner_->glean(UINT64_MAX); });
    if (!g.ok() && g.status().code() == Code::kNoSpace && !full_retried) {
      // The backend is full. The epoch commits whatever the glean could
      // apply behind the records it had no room for (removes free space);
      // then one more try, and the update fails with kNoSpace: nothing is
      // logged, nothing acknowledged is lost, and removes may free room.
      full_retried = true;
      PM_TRY(advance_epoch());
      continue;
    }
    if (!g.ok()) return g.status();
    PM_TRY(advance_epoch());
  }
}

Status StoreImpl::keep_replaced(const std::vector<Update>& ups, const std::vector<size_t>& which,
                                const std::vector<Item*>& old, uint64_t seq) {
  std::string v;
  try {
    for (size_t i : which) {
      const Update& u = ups[i];
      if (const Item* it = old[i]) {
        versions_.keep(u.key, it->seq, !it->tombstone, it->value(), seq);
        continue;
      }
      if (!versions_.may_keep(u.key, seq)) continue;  // spares the backend read
      Result<Backend::Found> f = be_->get(u.key, u.hash, &v);
      if (!f.ok()) return f.status();
      versions_.keep(u.key, f->seq, f->present, v, seq);
    }
  } catch (const std::bad_alloc&) {
    return Status::no_space("store: out of memory (DRAM) for the versions an open scan reads; "
                            "nothing was written");
  }
  return Status();
}

namespace {

// Whether the working index holds the key whose newest item is `current`
// (nullptr: the backend holds the newest version, or there is none), so
// that ordered reads need not take the key from the log (kOpKeyIndexed).
// Yes when the item is live and marked applied: that mark, even the moment
// mark_applied may leave on an item overwritten in place meanwhile, follows
// an applied put of the key (Frontend::fits keeps tombstones out of
// place), and no remove older than it takes the key out of the index
// after it: a gleaner collapses a record older than the key's item, and
// one that looked before the newer item came applies nothing older than
// the backend's entry (Backend::apply_remove and apply_put compare
// numbers). The key then leaves the index only by a remove newer than
// this update, which a snapshot that needs the key keeps
// (snapshot_versions.h).
bool key_indexed(const Item* current) {
  if (current == nullptr || current->tombstone) return false;
  if (g_kv_planted_bugs.index_flag_ignores_applied) return true;
  return current->applied_epoch.load(std::memory_order_acquire) != 0;
}

}  // namespace

Status StoreImpl::update(std::vector<Update>& ups, bool single) {
  pm::sync_point::point("kv.update.begin");
  PM_TRY(writable());
  PM_TRY(stop_.status());
  // Scratch kept per thread: a put allocates nothing but its item.
  thread_local std::vector<Op> ops;
  thread_local std::vector<Frontend::Bucket*> held, bucket;
  thread_local std::vector<Item*> old;
  thread_local std::vector<Op> logged;
  thread_local std::vector<size_t> which;
  thread_local std::vector<std::byte> buf;
  ops.resize(ups.size());
  for (size_t i = 0; i < ups.size(); i++) {
    ops[i] = {ups[i].remove ? OpCode::kRemove : OpCode::kPut, ups[i].key, ups[i].value};
  }
  const uint64_t n = record_size(ops);
  if (n > limits_.max_record) {
    return Status::invalid_argument("the transaction's " + std::to_string(n) +
                                    " bytes do not fit in one log record (at most " +
                                    std::to_string(limits_.max_record) + ")");
  }
  uint64_t put_bytes = 0;
  bool removes = false;
  for (const Op& op : ops) {
    if (op.op == OpCode::kPut) put_bytes += op.key.size() + op.value.size();
    removes |= op.op == OpCode::kRemove;
  }
  Result<LogState*> got = log_for(n, put_bytes, removes);
  if (!got.ok()) return got.status();
  LogState* L = *got;
  std::unique_lock<std::mutex> wl(L->writer_mu, std::adopt_lock);
  // Lock every bucket involved (a transaction holds txn_mu_, so two groups
  // never wait for each other's buckets). The bucket lock is held across the
  // append, so a key's records are in sequence order in every log.
  held.clear();
  held.reserve(ups.size());  // lock_once records each lock: it must not throw after one
  bucket.resize(ups.size());
  struct Unlock {
    std::vector<Frontend::Bucket*>& held;
    ~Unlock() {
      for (Frontend::Bucket* b : held) Frontend::unlock(b);
      held.clear();
    }
  } unlock{held};
  for (size_t i = 0; i < ups.size(); i++) bucket[i] = fe_.lock_once(ups[i].hash, &held);

  // Current items; removes of absent keys drop out.
  old.assign(ups.size(), nullptr);
  logged.clear();
  which.clear();
  for (size_t i = 0; i < ups.size(); i++) {
    const Update& u = ups[i];
    Item* it = Frontend::find(bucket[i], u.key, u.hash);
    old[i] = it;
    if (u.remove) {
      bool present = it != nullptr && !it->tombstone;
      if (it == nullptr) {
        Result<Backend::Found> f = be_->get(u.key, u.hash, nullptr);
        if (!f.ok()) return f.status();
        present = f->present;
      }
      if (!present) {
        if (single) return Status::not_found("no such key");
        continue;
      }
    }
    logged.push_back(ops[i]);
    logged.back().key_indexed = !u.remove && key_indexed(it);
    which.push_back(i);
  }
  if (logged.empty()) return Status();

  // Published before the number is taken (both seq_cst), so that a
  // snapshot that reads next_seq and then finds no update in flight here
  // knows this update's number is past its own (open_snapshot).
  L->in_flight.store(LogState::kTakingSeq);
  struct Landed {  // an update that fails is no longer in flight either
    LogState* L;
    ~Landed() {
      if (L != nullptr) L->in_flight.store(0, std::memory_order_release);
    }
  } landed{L};
  const uint64_t seq = next_seq_.fetch_add(1);  // seq_cst: see snapshot_versions.h
  L->in_flight.store(seq, std::memory_order_relaxed);
  if (versions_.wanted() && !g_kv_planted_bugs.snapshot_keeps_nothing) {
    PM_TRY(keep_replaced(ups, which, old, seq));
  }
  const uint64_t pos = L->tail.load(std::memory_order_relaxed);
  const LogRef ref = make_ref(L->log->index(), pos);
  // The new items, and the record, before anything is logged: out of DRAM,
  // the update fails having changed nothing (a record logged with no item
  // installed would be taken for collapsed and skipped by the gleaners).
  thread_local std::vector<Item*> made;
  made.assign(which.size(), nullptr);
  struct Unmade {  // items made and never installed
    std::vector<Item*>& made;
    ~Unmade() {
      for (Item*& it : made) {
        if (it != nullptr) Item::destroy(it);
        it = nullptr;
      }
    }
  } unmade{made};
  try {
    for (size_t k = 0; k < which.size(); k++) {
      const Update& u = ups[which[k]];
      if (Frontend::fits(old[which[k]], u.value)) continue;
      made[k] = Item::make(u.hash, seq, ref, u.key, u.value, u.remove);
    }
    encode_record(L->log->index(), pos, seq, session_, logged, &buf, persist_each());
  } catch (const std::bad_alloc&) {
    return Status::no_space("store: out of memory (DRAM) for an update of " +
                            std::to_string(n) + " bytes; nothing was written");
  }
  pm::sync_point::mark("kv.update.logging");
  Result<uint64_t> end = logs_->append(L, buf);
  if (!end.ok()) return end.status();
  wake_background_if(L->log->index(), *end);

  for (size_t k = 0; k < which.size(); k++) {
    const Update& u = ups[which[k]];
    Item* mine = std::exchange(made[k], nullptr);  // linked now: not Unmade's to free
    fe_.install_made(bucket[which[k]], old[which[k]], mine, seq, ref, u.value, u.remove);
    n_.add(u.remove ? Counter::kRemoves : Counter::kPuts);
  }
  L->in_flight.store(0, std::memory_order_release);  // installed: a snapshot seeing 0 sees it
  landed.L = nullptr;
  for (Frontend::Bucket* b : held) Frontend::unlock(b);
  held.clear();
  wl.unlock();
  // In flight: logged and visible, not yet durable off pmem.
  pm::sync_point::point("kv.update.installed");
  if (durability_ == Durability::kSync && !pmem_ && !g_kv_planted_bugs.skip_put_persist) {
    PM_TRY(logs_->wait_durable(L, *end));
  }
  if (!o_.background && fe_.wants_growth()) {
    try {
      fe_.grow();
    } catch (const std::bad_alloc&) {  // the update is done; a fuller table serves
    }
  }
  return Status();
}

Status StoreImpl::sync() {
  return stop_.or_stop("sync", [&] { return logs_->sync(); });
}

// ---------------------------------------------------------------- epochs

Result<uint64_t> StoreImpl::glean(uint64_t max_records) {
  PM_TRY(writable());
  return stop_.or_stop("glean", [&] { return gleaner_->glean(max_records); });
}

Status StoreImpl::advance_epoch() {
  PM_TRY(writable());
  return stop_.or_stop("epoch", [&] {
    PM_TRY(gleaner_->advance_epoch());
    evict_over_budget();
    return Status();
  });
}

Status StoreImpl::checkpoint() {
  PM_TRY(writable());
  return stop_.or_stop("checkpoint", [&] {
    PM_TRY(gleaner_->checkpoint());
    evict_over_budget();
    return Status();
  });
}

void StoreImpl::evict_over_budget() {
  if (o_.dram_budget_bytes == 0) return;
  if (fe_.bytes() > o_.dram_budget_bytes) {
    const uint64_t want = fe_.bytes() - o_.dram_budget_bytes * 9 / 10;
    fe_.evict(want, [this](const Item& it) { return gleaner_->clean(it); });
    // Evicted items' memory stays in malloc's arenas (each thread's) unless
    // trimmed: the budget is about the process's DRAM, not the heap's.
    malloc_trim(0);
  }
  // (The backend's private page copies are released by the epoch itself:
  // Gleaner::advance_epoch.)
}

// ---------------------------------------------------------------- stats

StoreStats StoreImpl::stats() {
  StoreStats st;
  // The backend's count plus what the records not yet applied change: no
  // scan of the data (exact when no update runs meanwhile).
  st.keys = gleaner_->live_keys();
  st.frontend_items = fe_.items();
  st.frontend_bytes = fe_.bytes();
  st.frontend_buckets = fe_.buckets();
  st.backend_keys = be_->count();
  st.backend_ghosts = be_->ghosts();
  pm::ContainerInfo ci = c_->usage();
  st.container_used_bytes = ci.used_bytes;
  st.container_file_bytes = ci.file_bytes;
  st.container_heap_free_bytes = ci.free_bytes;
  st.container_growth_bytes = ci.max_bytes > ci.heap_bytes ? ci.max_bytes - ci.heap_bytes : 0;
  st.container_private_bytes = ci.private_bytes;
  st.container_journaled_bytes = ci.journaled_bytes;
  st.container_fresh_bytes = ci.fresh_bytes;
  st.ordered = be_->index() != nullptr;
  st.max_key_bytes = limits_.max_key;
  st.max_value_bytes = limits_.max_value;
  st.max_record_bytes = limits_.max_record;
  st.log_bytes = logs_->capacity_bytes();
  st.log_used_bytes = logs_->used_bytes();
  st.puts = n_.value(Counter::kPuts);
  st.removes = n_.value(Counter::kRemoves);
  st.gets = n_.value(Counter::kGets);
  st.misses = n_.value(Counter::kMisses);
  st.records_applied = n_.value(Counter::kApplied);
  st.records_collapsed = n_.value(Counter::kCollapsed);
  st.epochs = n_.value(Counter::kEpochs);
  st.writer_waits = n_.value(Counter::kWriterWaits);
  st.blocked_rereads = gleaner_->blocked_rereads();
  st.background_wakes = wakes_.load(std::memory_order_relaxed);
  st.snapshots_open = versions_.open_snapshots();
  st.snapshot_versions = versions_.kept_versions();
  st.gleaners_active = active_gleaners_.load();
  st.recovered_records = n_.recovered_records;
  st.recovery_us = n_.recovery_us;
  st.is_pmem = pmem_;
  st.durability = durability_;
  return st;
}

}  // namespace kv
