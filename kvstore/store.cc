#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <random>
#include <unordered_map>

#include "kvstore/planted_bugs.h"
#include "kvstore/store_impl.h"

namespace kv {

KvPlantedBugs g_kv_planted_bugs;

namespace {

constexpr char kLayout[] = "kvstore";
constexpr uint64_t kMinLogBytes = 64 << 10;

uint64_t now_us() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

// Busy-waits ns nanoseconds (slower-PM emulation).
void emulate_delay(uint32_t ns) {
  if (ns == 0) return;
  const auto until = std::chrono::steady_clock::now() + std::chrono::nanoseconds(ns);
  while (std::chrono::steady_clock::now() < until) {
  }
}

// Which log a thread tries first: threads take the logs in turn, so that
// writers start on different logs (and runs are reproducible).
std::atomic<uint32_t> g_next_log_hint{0};
thread_local uint32_t t_log_hint = g_next_log_hint.fetch_add(1);

}  // namespace

// ---------------------------------------------------------------- options

Status check_store_options(const StoreOptions& o) {
  if (o.logs < 1 || o.logs > static_cast<int>(kMaxLogs)) {
    return Status::invalid_argument("logs must be 1.." + std::to_string(kMaxLogs));
  }
  if (o.log_bytes < kMinLogBytes || o.log_bytes % 4096 != 0) {
    return Status::invalid_argument("log_bytes must be a multiple of 4 KiB, at least 64 KiB");
  }
  if (o.log_bytes * static_cast<uint64_t>(o.logs) > (16ull << 30)) {
    return Status::invalid_argument("logs * log_bytes must be at most 16 GiB");
  }
  if (o.max_key_bytes < 1 || o.max_key_bytes > 65535) {
    return Status::invalid_argument("max_key_bytes must be 1..65535");
  }
  if (uint64_t{o.max_value_bytes} + o.max_key_bytes + 128 > o.log_bytes / 4) {
    return Status::invalid_argument("max_value_bytes (" + std::to_string(o.max_value_bytes) +
                                    ") must fit in a quarter of a log (log_bytes " +
                                    std::to_string(o.log_bytes) + ")");
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
  return co;
}

Status format_store(pm::Container* c, const StoreOptions& o) {
  PM_TRY(check_store_options(o));
  Geometry g;
  g.nlogs = static_cast<uint32_t>(o.logs);
  g.log_bytes = o.log_bytes;
  g.max_key = o.max_key_bytes;
  g.max_value = o.max_value_bytes;
  if (c->raw_size() < g.log_bytes * g.nlogs) {
    return Status::invalid_argument("the container's raw region is smaller than the logs");
  }
  Result<std::unique_ptr<Backend>> b = Backend::create(c, g);
  return b.status();
}

Result<std::unique_ptr<Store>> open_store_on(pm::Container* c, const StoreOptions& o) {
  auto s = std::make_unique<StoreImpl>(c, nullptr, o);
  PM_TRY(s->recover());
  s->start_threads();
  return std::unique_ptr<Store>(std::move(s));
}

Result<std::unique_ptr<Store>> Store::open(const std::string& path, const StoreOptions& o) {
  struct stat st;
  const bool exists = ::stat(path.c_str(), &st) == 0;
  // The geometry of an existing store is the one it was created with.
  StoreOptions checked = o;
  if (exists) checked.logs = 1, checked.log_bytes = 1 << 20, checked.max_value_bytes = 1024;
  PM_TRY(check_store_options(checked));
  pm::Options co = container_options(o);
  std::unique_ptr<pm::Container> c;
  if (!exists) {
    if (!o.create_if_missing) {
      return Status::not_found(path + ": no such store (create_if_missing is off)");
    }
    Result<std::unique_ptr<pm::Container>> r = pm::Container::create(path, co);
    if (!r.ok()) return r.status().with_context("create " + path);
    c = std::move(*r);
    PM_TRY(format_store(c.get(), o));
    PM_TRY(c->commit());
  } else {
    Result<std::unique_ptr<pm::Container>> r = pm::Container::open(path, co);
    if (!r.ok()) return r.status().with_context("open " + path);
    c = std::move(*r);
  }
  pm::Container* raw = c.get();
  auto s = std::make_unique<StoreImpl>(raw, std::move(c), o);
  Status rs = s->recover();
  if (!rs.ok()) return rs.with_context("open " + path);
  s->start_threads();
  return std::unique_ptr<Store>(std::move(s));
}

// ---------------------------------------------------------------- open and close

StoreImpl::StoreImpl(pm::Container* c, std::unique_ptr<pm::Container> owned,
                     const StoreOptions& o)
    : c_(c), owned_(std::move(owned)), o_(o), fe_(1 << 16) {}

StoreImpl::~StoreImpl() {
  stop_ = true;
  bg_cv_.notify_all();
  if (maintenance_.joinable()) maintenance_.join();
  for (std::thread& t : gleaners_) t.join();
  if (o_.durability == Durability::kAsync) (void)sync_logs();
}

Status StoreImpl::recover() {
  const uint64_t t0 = now_us();
  Result<std::unique_ptr<Backend>> b = Backend::attach(c_);
  if (!b.ok()) return b.status();
  be_ = std::move(*b);
  BackendRoot* r = be_->root();
  pmem_ = c_->info().is_pmem;
  if (o_.durability == Durability::kSyncOnPmem) {  // from here on, the mode in force
    o_.durability = pmem_ ? Durability::kSync : Durability::kAsync;
  }
  limits_.max_key = r->max_key;
  limits_.max_value = r->max_value;
  limits_.max_record = r->log_bytes / 4;
  // The new session must be durable before any record carries it: a record
  // of an older session found after one of a newer session is stale.
  session_ = static_cast<uint32_t>(r->session + 1);
  be_->set(&r->session, uint64_t{session_});

  struct Newest {
    uint64_t seq;
    LogRef ref;
    bool remove;
    std::string value;
  };
  std::unordered_map<std::string, Newest> newest;
  uint64_t max_seq = 0, records = 0;
  for (uint32_t i = 0; i < r->nlogs; i++) {
    auto L = std::make_unique<LogState>();
    L->log = std::make_unique<Log>(c_, i, uint64_t{i} * r->log_bytes, r->log_bytes);
    uint64_t pos = r->heads[i];
    uint32_t last_session = 0;
    Record rec;
    while (L->log->read(pos, limits_, &rec) &&
           ((rec.header.session >= last_session && rec.header.session < session_) ||
            g_kv_planted_bugs.no_session_check) &&
           pos + rec.header.len - r->heads[i] <= r->log_bytes) {
      last_session = rec.header.session;
      max_seq = std::max(max_seq, rec.header.seq);
      for (const Op& op : rec.ops) {
        Newest& n = newest[std::string(op.key)];
        if (n.ref == 0 || rec.header.seq > n.seq) {
          n = {rec.header.seq, make_ref(i, pos), op.op == OpCode::kRemove, std::string(op.value)};
        }
      }
      pos += rec.header.len;
      records++;
    }
    L->head = L->glean_pos = r->heads[i];
    L->tail = L->synced = pos;
    logs_.push_back(std::move(L));
  }
  // Newest per key into the frontend, unless the backend already holds it.
  for (auto& [key, n] : newest) {
    const uint64_t h = hash_key(key);
    Result<Backend::Found> f = be_->get(key, h, nullptr);
    if (!f.ok()) return f.status();
    if ((f->present || f->ghost) && f->seq >= n.seq && !g_kv_planted_bugs.replay_ignores_backend) {
      continue;
    }
    {
      Frontend::Locked lk(&fe_, h);
      lk.replace(lk.find(key, h), Item::make(h, n.seq, n.ref, key, n.value, n.remove));
    }
    if (fe_.wants_growth()) fe_.grow();
  }
  next_seq_ = std::max(r->seq_high, max_seq + 1);
  PM_TRY(c_->commit());
  n_.recovered_records = records;
  n_.recovery_us = now_us() - t0;
  if (o_.logger) {
    o_.logger(pm::LogLevel::kInfo, "kvstore: replayed " + std::to_string(records) +
                                       " log records (" + std::to_string(newest.size()) +
                                       " keys) in " + std::to_string(n_.recovery_us) + " us");
  }
  return Status();
}

void StoreImpl::start_threads() {
  if (!o_.background) return;
  active_gleaners_ = std::max(o_.min_gleaners, 1);
  for (int i = 0; i < o_.max_gleaners; i++) gleaners_.emplace_back([this, i] { gleaner_loop(i); });
  maintenance_ = std::thread([this] { maintenance_loop(); });
}

// ---------------------------------------------------------------- errors

Status StoreImpl::background_error() const {
  std::lock_guard<std::mutex> l(err_mu_);
  return bg_error_;
}

void StoreImpl::set_background_error(const Status& s) {
  std::lock_guard<std::mutex> l(err_mu_);
  if (bg_error_.ok()) bg_error_ = s.with_context("store stopped applying its logs");
  if (o_.logger) o_.logger(pm::LogLevel::kError, bg_error_.to_string());
}

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

// ---------------------------------------------------------------- reads

Status StoreImpl::get(std::string_view key, std::string* value) {
  n_.gets.fetch_add(1, std::memory_order_relaxed);
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

Status StoreImpl::miss(std::string_view key, uint64_t h, std::string* value, bool* found) {
  n_.misses.fetch_add(1, std::memory_order_relaxed);
  Frontend::Locked lk(&fe_, h);
  if (const Item* it = lk.find(key, h)) {  // installed meanwhile
    *found = !it->tombstone;
    if (*found && value != nullptr) value->assign(it->value());
    return Status();
  }
  std::string v;
  Result<Backend::Found> f = be_->get(key, h, &v);
  if (!f.ok()) return f.status();
  emulate_delay(o_.emulate_read_ns);
  *found = f->present;
  if (!f->present) return Status();
  if (o_.dram_budget_bytes == 0 || fe_.bytes() < o_.dram_budget_bytes) {
    Item* it = Item::make(h, f->seq, 0, key, v, false);
    it->applied_epoch.store(1);  // the backend holds it: clean
    lk.replace(nullptr, it);
  }
  if (value != nullptr) *value = std::move(v);
  return Status();
}

Status StoreImpl::scan(std::string_view prefix,
                       const std::function<bool(std::string_view, std::string_view)>& fn) {
  PM_TRY(background_error());
  // Backend keys the frontend does not override, then the frontend's.
  bool go_on = true;
  PM_TRY(be_->scan(prefix, [&](std::string_view k, std::string_view v) {
    Reclaimer::Guard g;
    if (fe_.peek(k, hash_key(k)) != nullptr) return true;
    go_on = fn(k, v);
    return go_on;
  }));
  if (!go_on) return Status();
  std::vector<std::pair<std::string, std::string>> items;
  fe_.for_each([&](const Item& it) {
    if (!it.tombstone && it.key().starts_with(prefix)) items.emplace_back(it.key(), it.value());
  });
  for (auto& [k, v] : items) {
    if (!fn(k, v)) break;
  }
  return Status();
}

// ---------------------------------------------------------------- updates

Status StoreImpl::put(std::string_view key, std::string_view value) {
  PM_TRY(check_sizes(key, value));
  thread_local std::vector<Update> ups(1);
  ups.assign(1, {false, key, value, hash_key(key)});
  return update(ups, true);
}

Status StoreImpl::remove(std::string_view key) {
  if (key.empty() || key.size() > limits_.max_key) return Status::not_found("no such key");
  thread_local std::vector<Update> ups(1);
  ups.assign(1, {true, key, {}, hash_key(key)});
  return update(ups, true);
}

Status Transaction::put(std::string_view key, std::string_view value) {
  ops_.push_back({false, std::string(key), std::string(value)});
  return Status();
}

Status Transaction::remove(std::string_view key) {
  ops_.push_back({true, std::string(key), {}});
  return Status();
}

Status Transaction::commit() {
  Status s = ops_.empty() ? Status() : store_->apply_batch(ops_);
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
  std::lock_guard<std::mutex> l(txn_mu_);
  return update(ups, false);
}

LogState* StoreImpl::acquire_log(uint64_t n, bool* busy) {
  const uint32_t nlogs = static_cast<uint32_t>(logs_.size());
  const uint32_t start = t_log_hint;
  for (uint32_t i = 0; i < nlogs; i++) {
    const uint32_t idx = (start + i) % nlogs;
    LogState* L = logs_[idx].get();
    if (!L->writer_mu.try_lock()) {
      *busy = true;
      continue;
    }
    const uint64_t used = L->tail.load(std::memory_order_relaxed) -
                          L->head.load(std::memory_order_acquire);
    if (used + n <= L->log->capacity()) {
      t_log_hint = idx;
      return L;
    }
    L->writer_mu.unlock();
  }
  return nullptr;
}

Status StoreImpl::help_glean() {
  n_.writer_waits.fetch_add(1, std::memory_order_relaxed);
  bg_cv_.notify_all();
  Result<uint64_t> g = glean(UINT64_MAX);
  if (!g.ok()) return g.status();
  return advance_epoch();
}

Status StoreImpl::update(std::vector<Update>& ups, bool single) {
  PM_TRY(background_error());
  // Scratch kept per thread: a put allocates nothing but its item.
  thread_local std::vector<Op> ops;
  thread_local std::vector<Frontend::Bucket*> held, bucket;
  thread_local std::vector<Item*> old;
  thread_local std::vector<Op> logged;
  thread_local std::vector<size_t> which;
  ops.resize(ups.size());
  for (size_t i = 0; i < ups.size(); i++) {
    ops[i] = {ups[i].remove ? OpCode::kRemove : OpCode::kPut, ups[i].key, ups[i].value, 0};
  }
  const uint64_t n = record_size(ops);
  if (n > limits_.max_record) {
    return Status::invalid_argument("the transaction's " + std::to_string(n) +
                                    " bytes do not fit in one log record (at most " +
                                    std::to_string(limits_.max_record) + ")");
  }
  LogState* L;
  for (;;) {
    bool busy = false;
    L = acquire_log(n, &busy);
    if (L != nullptr) break;
    if (busy) {
      std::this_thread::yield();
    } else {
      PM_TRY(help_glean());
    }
  }
  std::unique_lock<std::mutex> wl(L->writer_mu, std::adopt_lock);
  // Lock every bucket involved (a transaction holds txn_mu_, so two groups
  // never wait for each other's buckets).
  held.clear();
  bucket.resize(ups.size());
  struct Unlock {
    std::vector<Frontend::Bucket*>& held;
    ~Unlock() {
      for (Frontend::Bucket* b : held) Frontend::unlock(b);
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
    ops[i].prev = it != nullptr ? it->lentry : 0;
    logged.push_back(ops[i]);
    which.push_back(i);
  }
  if (logged.empty()) return Status();

  const uint64_t seq = next_seq_.fetch_add(1);
  const uint64_t pos = L->tail.load(std::memory_order_relaxed);
  thread_local std::vector<std::byte> buf;
  encode_record(L->log->index(), pos, seq, session_, logged, &buf);
  PM_TRY(L->log->write(pos, buf.data(), buf.size()));
  const bool sync = o_.durability == Durability::kSync;
  if (sync && pmem_ && !g_kv_planted_bugs.skip_put_persist) {
    PM_TRY(L->log->persist(pos, buf.size()));  // the one barrier
    emulate_delay(o_.emulate_persist_ns);
  }
  const uint64_t end = pos + buf.size();
  L->tail.store(end, std::memory_order_release);
  // Wake sleeping background threads only when there is work worth it: a
  // futex wake per put would cost more than the put.
  if (background_idle_.load(std::memory_order_relaxed) &&
      (end - L->head.load(std::memory_order_relaxed) > L->log->capacity() / 8 ||
       fe_.wants_growth())) {
    background_idle_.store(false, std::memory_order_relaxed);
    bg_cv_.notify_all();
  }

  const LogRef ref = make_ref(L->log->index(), pos);
  for (size_t i : which) {
    const Update& u = ups[i];
    fe_.replace(bucket[i], old[i], Item::make(u.hash, seq, ref, u.key, u.value, u.remove));
    (u.remove ? n_.removes : n_.puts).fetch_add(1, std::memory_order_relaxed);
  }
  for (Frontend::Bucket* b : held) Frontend::unlock(b);
  held.clear();
  wl.unlock();
  if (sync && !pmem_ && !g_kv_planted_bugs.skip_put_persist) PM_TRY(wait_durable(L, end));
  if (!o_.background && fe_.wants_growth()) fe_.grow();
  return Status();
}

// ---------------------------------------------------------------- durability

Status StoreImpl::sync_logs() {
  for (auto& L : logs_) {
    const uint64_t t = L->tail.load(std::memory_order_acquire);
    const uint64_t from = L->synced.load(std::memory_order_relaxed);
    if (t > from) {
      PM_TRY(L->log->persist(from, t - from));
      L->synced.store(t, std::memory_order_release);
    }
  }
  return Status();
}

// Group commit: one thread syncs everything written so far; the others wait
// for it and find their record covered.
Status StoreImpl::wait_durable(LogState* L, uint64_t end) {
  std::unique_lock<std::mutex> l(sync_mu_);
  while (L->synced.load(std::memory_order_acquire) < end) {
    if (syncing_) {
      sync_cv_.wait(l);
      continue;
    }
    PM_TRY(lead_sync(l));
  }
  return Status();
}

// One sync of every log by the calling thread while the others wait.
// REQUIRES: l holds sync_mu_ and no sync runs; l holds it again on return.
Status StoreImpl::lead_sync(std::unique_lock<std::mutex>& l) {
  syncing_ = true;
  l.unlock();
  Status s = sync_logs();
  l.lock();
  syncing_ = false;
  sync_cv_.notify_all();
  return s;
}

Status StoreImpl::sync() {
  PM_TRY(background_error());
  std::unique_lock<std::mutex> l(sync_mu_);
  sync_cv_.wait(l, [&] { return !syncing_; });
  return lead_sync(l);
}

// ---------------------------------------------------------------- gleaning

Status StoreImpl::apply_op(const Op& op, LogRef ref, uint64_t seq) {
  const uint64_t h = hash_key(op.key);
  Reclaimer::Guard g;
  const Item* it = fe_.peek(op.key, h);
  if (it == nullptr || it->lentry != ref) {  // superseded: write collapsing
    n_.collapsed.fetch_add(1, std::memory_order_relaxed);
    return Status();
  }
  if (op.op == OpCode::kRemove) {
    PM_TRY(be_->apply_remove(op.key, h, seq));
    std::lock_guard<std::mutex> l(tomb_mu_);
    tomb_keys_.emplace_back(op.key);
  } else {
    PM_TRY(be_->apply_put(op.key, h, op.value, seq));
  }
  it->applied_epoch.store(committed_epoch_.load() + 1, std::memory_order_release);
  n_.applied.fetch_add(1, std::memory_order_relaxed);
  return Status();
}

Result<uint64_t> StoreImpl::glean(uint64_t max_records) {
  PM_TRY(background_error());
  std::shared_lock<std::shared_mutex> ep(epoch_mu_);
  pm::MutationGuard mg(*c_);
  uint64_t seen = 0;
  const uint32_t nlogs = static_cast<uint32_t>(logs_.size());
  const uint32_t start = glean_rr_.fetch_add(1);
  Record rec;
  for (uint32_t i = 0; i < nlogs && seen < max_records; i++) {
    LogState* L = logs_[(start + i) % nlogs].get();
    std::unique_lock<std::mutex> gl(L->glean_mu, std::try_to_lock);
    if (!gl.owns_lock()) continue;
    uint64_t pos = L->glean_pos.load(std::memory_order_relaxed);
    const uint64_t tail = L->tail.load(std::memory_order_acquire);
    while (pos < tail && seen < max_records) {
      emulate_delay(o_.emulate_read_ns);
      if (!L->log->read(pos, limits_, &rec)) {
        Status s = Status::corruption("log " + std::to_string(L->log->index()) + ": record at " +
                                      std::to_string(pos) + " does not validate");
        set_background_error(s);
        return s;
      }
      for (const Op& op : rec.ops) {
        Status s = apply_op(op, make_ref(L->log->index(), pos), rec.header.seq);
        if (!s.ok()) {
          set_background_error(s);
          return s;
        }
      }
      pos += rec.header.len;
      L->glean_pos.store(pos, std::memory_order_release);
      seen++;
    }
  }
  return seen;
}

Status StoreImpl::advance_epoch() {
  PM_TRY(background_error());
  std::vector<std::string> tombs;
  {
    std::unique_lock<std::shared_mutex> ep(epoch_mu_);
    bool moved = false;
    for (auto& L : logs_) moved |= L->glean_pos.load() != L->head.load();
    if (!moved && be_->ghosts() == 0) return Status();
    Status s;
    {
      pm::MutationGuard mg(*c_);  // info() and check() read the heap meanwhile
      s = be_->split_as_needed(1 << 16);
      // The oldest record still in a log after this commit bounds what a ghost
      // must guard against.
      uint64_t min_live = next_seq_.load();
      for (auto& L : logs_) {
        const uint64_t gp = L->glean_pos.load();
        uint64_t seq;
        if (gp < L->tail.load(std::memory_order_acquire) && L->log->peek_seq(gp, &seq)) {
          min_live = std::min(min_live, seq);
        }
      }
      if (s.ok()) s = be_->purge_ghosts(min_live);
      if (s.ok()) {
        be_->store_counters();
        BackendRoot* r = be_->root();
        for (size_t i = 0; i < logs_.size(); i++) {
          uint64_t head = logs_[i]->glean_pos.load();
          if (g_kv_planted_bugs.reclaim_unapplied) head = logs_[i]->tail.load();
          be_->set(&r->heads[i], head);
        }
        be_->set(&r->seq_high, next_seq_.load());
      }
    }
    if (s.ok()) {
      s = c_->commit();
      emulate_delay(2 * o_.emulate_persist_ns);  // its two barriers
    }
    if (!s.ok()) {
      set_background_error(s);
      return s;
    }
    // Durable: the gleaned log space is free, the applied items are clean.
    for (auto& L : logs_) L->head.store(L->glean_pos.load(), std::memory_order_release);
    committed_epoch_.fetch_add(1, std::memory_order_acq_rel);
    n_.epochs.fetch_add(1, std::memory_order_relaxed);
    std::lock_guard<std::mutex> l(tomb_mu_);
    tombs.swap(tomb_keys_);
  }
  drop_applied_tombstones(tombs);
  if (o_.dram_budget_bytes != 0 && fe_.bytes() > o_.dram_budget_bytes) {
    const uint64_t want = fe_.bytes() - o_.dram_budget_bytes * 9 / 10;
    fe_.evict(want, [this](const Item& it) { return clean(it); });
  }
  return Status();
}

// A removed key leaves the frontend once the backend's removal is committed.
void StoreImpl::drop_applied_tombstones(std::vector<std::string>& keys) {
  for (const std::string& k : keys) {
    const uint64_t h = hash_key(k);
    Frontend::Locked lk(&fe_, h);
    Item* it = lk.find(k, h);
    if (it != nullptr && it->tombstone && clean(*it)) lk.erase(it);
  }
}

Status StoreImpl::checkpoint() {
  std::vector<uint64_t> target;
  for (auto& L : logs_) target.push_back(L->tail.load(std::memory_order_acquire));
  for (;;) {
    Result<uint64_t> g = glean(UINT64_MAX);
    if (!g.ok()) return g.status();
    bool done = true;
    for (size_t i = 0; i < logs_.size(); i++) done &= logs_[i]->glean_pos.load() >= target[i];
    if (done) break;
    std::this_thread::yield();  // another gleaner holds a log: wait for it
  }
  return advance_epoch();
}

// ---------------------------------------------------------------- background

double StoreImpl::occupancy() const {
  uint64_t used = 0, cap = 0;
  for (auto& L : logs_) {
    used += L->tail.load(std::memory_order_relaxed) - L->head.load(std::memory_order_relaxed);
    cap += L->log->capacity();
  }
  return cap ? static_cast<double>(used) / static_cast<double>(cap) : 0;
}

void StoreImpl::gleaner_loop(int id) {
  while (!stop_.load()) {
    if (id >= active_gleaners_.load()) {
      std::unique_lock<std::mutex> l(bg_mu_);
      bg_cv_.wait_for(l, std::chrono::milliseconds(50));
      continue;
    }
    Result<uint64_t> n = glean(4096);
    if (!n.ok()) return;  // recorded as the background error
    if (*n == 0) {
      // Nothing to do: sleep until a writer has filled an eighth of a log
      // (it wakes us) or an epoch has passed. Waking every millisecond
      // instead cost gets a 40 us p99.9 on two cores.
      std::unique_lock<std::mutex> l(bg_mu_);
      background_idle_.store(true, std::memory_order_relaxed);
      bg_cv_.wait_for(l, std::chrono::milliseconds(o_.epoch_ms));
    }
  }
}

void StoreImpl::maintenance_loop() {
  uint64_t last_sync = now_us(), last_epoch = now_us();
  while (!stop_.load()) {
    {
      uint32_t ms = o_.epoch_ms;
      if (o_.durability == Durability::kAsync) ms = std::min(ms, o_.async_sync_ms);
      std::unique_lock<std::mutex> l(bg_mu_);
      background_idle_.store(true, std::memory_order_relaxed);
      bg_cv_.wait_for(l, std::chrono::milliseconds(std::max<uint32_t>(ms, 1)));
    }
    if (fe_.wants_growth()) fe_.grow();
    const uint64_t now = now_us();
    const double occ = occupancy();
    if (now - last_epoch >= o_.epoch_ms * 1000ull || occ > 0.5) {
      last_epoch = now;
      if (!advance_epoch().ok()) return;
      // Dynamic roles: more gleaners while the logs fill, fewer when they drain.
      int active = active_gleaners_.load();
      const double occ_now = occupancy();
      if (occ_now > 0.6 && occ_now >= last_occupancy_ && active < o_.max_gleaners) active++;
      if (occ_now < 0.3 && active > std::max(o_.min_gleaners, 1)) active--;
      active_gleaners_ = active;
      last_occupancy_ = occ_now;
      Reclaimer::collect();
    }
    if (o_.durability == Durability::kAsync && now - last_sync >= o_.async_sync_ms * 1000ull) {
      last_sync = now;
      if (Status s = sync(); !s.ok()) set_background_error(s);
    }
  }
}

// ---------------------------------------------------------------- stats

StoreStats StoreImpl::stats() {
  StoreStats st;
  uint64_t keys = 0;
  (void)scan("", [&](std::string_view, std::string_view) {
    keys++;
    return true;
  });
  st.keys = keys;
  st.frontend_items = fe_.items();
  st.frontend_bytes = fe_.bytes();
  st.frontend_buckets = fe_.buckets();
  st.backend_keys = be_->count();
  st.backend_ghosts = be_->ghosts();
  pm::ContainerInfo ci = c_->info();
  st.container_used_bytes = ci.used_bytes;
  st.container_file_bytes = ci.file_bytes;
  for (auto& L : logs_) {
    st.log_bytes += L->log->capacity();
    st.log_used_bytes += L->tail.load() - L->head.load();
  }
  st.puts = n_.puts;
  st.removes = n_.removes;
  st.gets = n_.gets;
  st.misses = n_.misses;
  st.records_applied = n_.applied;
  st.records_collapsed = n_.collapsed;
  st.epochs = n_.epochs;
  st.writer_waits = n_.writer_waits;
  st.gleaners_active = active_gleaners_.load();
  st.recovered_records = n_.recovered_records;
  st.recovery_us = n_.recovery_us;
  st.is_pmem = pmem_;
  st.durability = o_.durability;
  return st;
}

}  // namespace kv
