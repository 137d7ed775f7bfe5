#include "cache.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <ctime>
#include <new>
#include <random>
#include <system_error>

namespace pmcached {

namespace {

// The item header in front of the data (little-endian, as the host).
struct Header {
  uint32_t magic;
  uint32_t flags;
  int64_t exptime;
  uint64_t cas;
  int64_t time;
};
static_assert(sizeof(Header) == 32);
// The magic's low three bytes are "PMC"; its high byte is '1' for an item
// with no meta state (the only form before there was state, so older
// stores read unchanged), or 0x80 | Item::state. The header stays 32 bytes
// either way: an item of -I bytes can take state, as the store's records
// are sized for -I plus this header.
constexpr uint32_t kMagic = 0x31434d50;  // "PMC1"
constexpr uint32_t kMagicMask = 0x00ffffff;
constexpr uint32_t kStateForm = 0x80;

// The cache's own records: under a NUL byte, which no client key holds.
const std::string kCasKey("\0pmcached/cas", 13);
const std::string kFlushKey("\0pmcached/flush", 15);
// CAS uniques are reserved this many at a time (one durable put each).
constexpr uint64_t kCasBlock = 1 << 20;

std::string encode(const Item& it, int64_t time) {
  const uint32_t magic =
      it.state == 0 ? kMagic : (kMagic & kMagicMask) | (kStateForm | it.state) << 24;
  const Header h{magic, it.flags, it.exptime, it.cas, time};
  std::string v(sizeof h + it.data.size(), '\0');
  std::memcpy(v.data(), &h, sizeof h);
  std::memcpy(v.data() + sizeof h, it.data.data(), it.data.size());
  return v;
}

bool decode(std::string_view v, Header* h, uint32_t* state) {
  if (v.size() < sizeof *h) return false;
  std::memcpy(h, v.data(), sizeof *h);
  const uint32_t high = h->magic >> 24;
  *state = high == (kMagic >> 24) ? 0 : high & ~kStateForm;
  return (h->magic & kMagicMask) == (kMagic & kMagicMask) &&
         (*state == 0 ? high == (kMagic >> 24) : (high & kStateForm) != 0);
}

// Client keys that start with a NUL byte (binary keys, which the meta
// protocol takes in base64) are stored with one more in front: the cache's
// own records are under a single NUL, and no client key reaches them.
class StoreKey {
 public:
  explicit StoreKey(std::string_view key) : key_(key) {
    if (!key.empty() && key[0] == '\0') {
      escaped_.assign(1, '\0').append(key);
      key_ = escaped_;
    }
  }
  StoreKey(const StoreKey&) = delete;  // key_ may point into escaped_
  StoreKey& operator=(const StoreKey&) = delete;
  operator std::string_view() const { return key_; }

 private:
  std::string escaped_;
  std::string_view key_;
};

bool own_record(std::string_view k) {
  return k.empty() || (k[0] == '\0' && (k.size() < 2 || k[1] != '\0'));
}

uint64_t entry_bytes(std::string_view key, size_t data) { return key.size() + sizeof(Header) + data; }

}  // namespace

bool parse_u64(std::string_view s, uint64_t* out) {
  auto space = [](char c) { return c == ' ' || (c >= '\t' && c <= '\r'); };
  size_t i = 0;
  while (i < s.size() && space(s[i])) i++;
  // A sign, as strtoull takes it; memcached then refuses a negative number
  // but not "-0" (its safe_strtoull), and so do we.
  const bool minus = i < s.size() && s[i] == '-';
  if (i < s.size() && (s[i] == '+' || minus)) i++;
  const size_t first = i;
  uint64_t v = 0;
  for (; i < s.size() && s[i] >= '0' && s[i] <= '9'; i++) {
    const auto d = static_cast<uint64_t>(s[i] - '0');
    if (v > (UINT64_MAX - d) / 10) return false;
    v = v * 10 + d;
  }
  if (i == first || (i < s.size() && !space(s[i])) || (minus && v != 0)) return false;
  *out = v;
  return true;
}

struct Cache::Counters {
  std::atomic<uint64_t> total_items{0}, get_hits{0}, get_misses{0}, get_expired{0},
      get_flushed{0}, cmd_get{0}, cmd_set{0}, cmd_touch{0}, cmd_flush{0}, touch_hits{0},
      touch_misses{0}, delete_hits{0}, delete_misses{0}, incr_hits{0}, incr_misses{0},
      decr_hits{0}, decr_misses{0}, cas_hits{0}, cas_misses{0}, cas_badval{0}, evictions{0},
      reclaimed{0};
};

Cache::Cache(std::unique_ptr<kv::Store> store, const CacheOptions& o)
    : store_(std::move(store)), o_(o), start_(o.clock()), n_(std::make_unique<Counters>()) {
  for (size_t i = 0; i < kShards; i++) shards_.push_back(std::make_unique<Shard>());
}

Result<std::unique_ptr<Cache>> Cache::open(const std::string& path, const CacheOptions& options) {
  CacheOptions o = options;
  if (!o.clock) o.clock = [] { return static_cast<int64_t>(::time(nullptr)); };
  if (o.item_max == 0 || o.item_max > (1u << 30)) {
    return Status::invalid_argument("item size limit (-I) must be 1 byte to 1 GiB");
  }
  kv::StoreOptions so;
  so.max_key_bytes = kMaxKey + 16;
  so.max_value_bytes = o.item_max + sizeof(Header);
  // A record must fit a quarter of a log.
  so.log_bytes = std::max<uint64_t>(8ull << 20, (uint64_t{so.max_value_bytes} + (64 << 10)) * 4);
  so.log_bytes = (so.log_bytes + (1 << 20) - 1) / (1 << 20) * (1 << 20);
  // Each log is preallocated in the file: with logs four items large, two
  // of them past 64 MiB of logs in all (-I 1g: two logs of 4 GiB; eight,
  // the store's default, would pass the store's limit of 16 GiB).
  const uint64_t budget = std::max<uint64_t>(64ull << 20, 2 * so.log_bytes);
  so.logs = static_cast<int>(std::clamp<uint64_t>(budget / so.log_bytes, 2, so.logs));
  so.durability = o.durability;
  so.logger = o.logger;
  Result<std::unique_ptr<kv::Store>> s = kv::Store::open(path, so);
  if (!s.ok()) return s.status();
  const kv::StoreStats st = (*s)->stats();
  if (st.max_value_bytes < so.max_value_bytes) {
    return Status::invalid_argument(
        path + ": made for items of up to " + std::to_string(st.max_value_bytes - sizeof(Header)) +
        " bytes; -I " + std::to_string(o.item_max) + " needs a new store");
  }
  std::unique_ptr<Cache> c(new Cache(std::move(*s), o));
  c->path_ = path;
  PM_TRY(c->init());
  return c;
}

Status Cache::init() {
  std::string v;
  Status s = store_->get(kCasKey, &v);
  if (s.ok() && v.size() == sizeof(uint64_t)) std::memcpy(&cas_next_, v.data(), sizeof cas_next_);
  if (!s.ok() && !s.is_not_found()) return s;
  cas_end_ = cas_next_;
  s = store_->get(kFlushKey, &v);
  if (s.ok() && v.size() == 16) {
    uint64_t fc;
    int64_t ft;
    std::memcpy(&fc, v.data(), 8);
    std::memcpy(&ft, v.data() + 8, 8);
    flush_cas_ = fc;
    flush_time_ = ft;
  }
  if (!s.ok() && !s.is_not_found()) return s;
  try {
    rebuild_ = std::thread([this] { rebuild_index(); });
    if (o_.background) background_ = std::thread([this] { background(); });
  } catch (const std::system_error& e) {  // the one started stops in ~Cache
    return Status::from_errno("start the cache's background threads", e.code().value());
  }
  return Status();
}

Cache::~Cache() {
  {
    std::lock_guard<std::mutex> l(bg_mu_);
    stopping_ = true;
  }
  bg_cv_.notify_all();
  if (rebuild_.joinable()) rebuild_.join();
  if (background_.joinable()) background_.join();
}

Cache::Shard& Cache::shard_of(std::string_view key) {
  return *shards_[std::hash<std::string_view>()(key) % kShards];
}

int64_t Cache::absolute(int64_t exptime) const {
  if (exptime == 0) return 0;
  if (exptime < 0) return -1;  // expired already
  if (exptime > kRelativeExpiryMax) return exptime <= start_ ? -1 : exptime;
  return now() + exptime;
}

bool Cache::dead(int64_t exptime, int64_t time, uint64_t cas) const {
  const int64_t t = now();
  if (exptime != 0 && exptime <= t) return true;
  if (cas <= flush_cas_.load(std::memory_order_relaxed)) return true;
  const int64_t ft = flush_time_.load(std::memory_order_relaxed);
  return ft != 0 && t >= ft && time < ft;
}

Result<uint64_t> Cache::next_cas() {
  std::lock_guard<std::mutex> l(cas_mu_);
  if (cas_next_ >= cas_end_) {
    // The end of the new block is durable before any unique from it is
    // used, so that no unique is handed out twice across a crash.
    const uint64_t end = cas_end_ + kCasBlock;
    PM_TRY(store_->put(kCasKey, std::string_view(reinterpret_cast<const char*>(&end), sizeof end)));
    PM_TRY(store_->sync());
    cas_end_ = end;
  }
  return cas_next_++;
}

Result<bool> Cache::read_locked(Shard& s, std::string_view key, Item* out, int64_t* time,
                                bool bump) {
  auto e = s.index.find(std::string(key));
  if (e == s.index.end() && index_ready_.load(std::memory_order_acquire)) return false;
  std::string v;
  Status st = store_->get(key, &v);
  if (st.is_not_found()) return false;
  if (!st.ok()) return st;
  Header h;
  uint32_t state;
  if (!decode(v, &h, &state)) {
    return Status::corruption("item '" + std::string(key) + "' has no valid header");
  }
  if (dead(h.exptime, h.time, h.cas)) {
    const bool expired = h.exptime != 0 && h.exptime <= now();
    (expired ? n_->get_expired : n_->get_flushed)++;
    PM_TRY(remove_locked(s, key));
    return false;
  }
  if (bump && e != s.index.end()) {
    e->second.atime = static_cast<uint32_t>(now() - start_);
    e->second.fetched = true;
  }
  out->flags = h.flags;
  out->exptime = h.exptime;
  out->cas = h.cas;
  out->state = state;
  out->data.assign(v, sizeof h);
  if (time != nullptr) *time = h.time;
  return true;
}

Status Cache::write_locked(Shard& s, std::string_view key, const Item& it, int64_t time,
                           bool fresh) {
  PM_TRY(store_->put(key, encode(it, time)));
  const uint64_t bytes = entry_bytes(key, it.data.size());
  auto [e, inserted] = s.index.try_emplace(std::string(key));
  if (inserted) {
    items_++;
  } else {
    bytes_ -= e->second.bytes;
  }
  bytes_ += bytes;
  const bool keep = !inserted && !fresh;
  const uint32_t atime = keep ? e->second.atime : static_cast<uint32_t>(now() - start_);
  e->second = Entry{static_cast<uint32_t>(bytes), atime, keep && e->second.fetched, it.exptime,
                    time, it.cas};
  return Status();
}

Status Cache::remove_locked(Shard& s, std::string_view key) {
  Status st = store_->remove(key);
  if (!st.ok() && !st.is_not_found()) return st;
  auto e = s.index.find(std::string(key));
  if (e != s.index.end()) {
    bytes_ -= e->second.bytes;
    items_--;
    s.index.erase(e);
  }
  if (!index_ready_.load(std::memory_order_acquire)) s.removed_during_rebuild.emplace(key);
  return Status();
}

Result<bool> Cache::get(std::string_view client_key, Item* out, const int64_t* touch) {
  const StoreKey key(client_key);
  Shard& s = shard_of(key);
  std::lock_guard<std::mutex> l(s.mu);
  // As memcached: a gat counts as a touch, not as a get.
  (touch != nullptr ? n_->cmd_touch : n_->cmd_get)++;
  int64_t time = 0;
  Result<bool> found = read_locked(s, key, out, &time, true);
  if (!found.ok()) return found;
  if (!*found) {
    (touch != nullptr ? n_->touch_misses : n_->get_misses)++;
    return false;
  }
  if (touch == nullptr) n_->get_hits++;
  if (touch != nullptr) {
    n_->touch_hits++;
    out->exptime = absolute(*touch);
    if (out->exptime < 0) {
      PM_TRY(remove_locked(s, key));  // the item is returned, then gone
    } else {
      PM_TRY(write_locked(s, key, *out, time, false));
    }
  }
  return true;
}

Result<bool> Cache::meta_get(std::string_view client_key, Item* out, MetaGet* m) {
  const StoreKey key(client_key);
  Result<bool> r = meta_get_locked(key, out, m);
  if (r.ok() && m->created) PM_TRY(evict_if_over(key, entry_bytes(key, 0)));
  return r;
}

Result<bool> Cache::meta_get_locked(std::string_view key, Item* out, MetaGet* m) {
  Shard& s = shard_of(key);
  std::lock_guard<std::mutex> l(s.mu);
  n_->cmd_get++;
  if (m->touch != nullptr) n_->cmd_touch++;
  // The access record as it was: h and l report it before this read (a
  // second lookup, so only when asked).
  if (auto e = m->access ? s.index.find(std::string(std::string_view(key))) : s.index.end();
      e != s.index.end()) {
    m->fetched = e->second.fetched;
    m->idle = now() - start_ - e->second.atime;
  }
  int64_t time = 0;
  Result<bool> found = read_locked(s, key, out, &time, m->bump);
  if (!found.ok()) return found;
  bool changed = false;
  if (!*found) {
    n_->get_misses++;
    if (m->touch != nullptr) n_->touch_misses++;
    if (!m->vivify) return false;
    // With -M and no room, no item (memcached's allocation fails: a miss).
    if (!o_.evict && bytes_.load() + entry_bytes(key, 0) > o_.memory_limit) return false;
    // As memcached: an empty item, whose recache this client has won.
    *out = Item();
    out->exptime = absolute(m->touch != nullptr && m->touch_last ? *m->touch : m->vivify_exptime);
    out->state = m->grant ? kTokenSent : 0;
    m->fetched = false;
    m->idle = 0;
    m->created = true;
    m->won = m->grant;
    time = now();
    Result<uint64_t> c = next_cas();
    if (!c.ok()) return c.status();
    out->cas = *c;
    if (out->exptime < 0) return true;  // expired at once: nothing to store
    PM_TRY(write_locked(s, key, *out, time));
    n_->total_items++;
    // This read counts as its first (h shows it to the next one).
    if (m->bump) s.index[std::string(std::string_view(key))].fetched = true;
    return true;
  }
  n_->get_hits++;
  m->exptime_before = out->exptime;
  if (m->touch != nullptr) {
    n_->touch_hits++;
    out->exptime = absolute(*m->touch);
    changed = true;
  }
  if ((out->state & kTokenSent) == 0 && m->grant) {
    // R: the item expires before the client's horizon (or has, by T); a
    // stale item: it must be replaced. Either way, the first to ask
    // recaches it.
    const int64_t e = m->recache_after_touch ? out->exptime : m->exptime_before;
    const bool expiring = m->recache && *m->recache > 0 && e != 0 && e < absolute(*m->recache);
    if (expiring || (out->state & kStale) != 0) {
      m->won = true;
      out->state |= kTokenSent;
      changed = true;
    }
  }
  if (changed && out->exptime < 0) {
    PM_TRY(remove_locked(s, key));  // returned, then gone (as gat)
  } else if (changed) {
    PM_TRY(write_locked(s, key, *out, time, false));
  }
  return true;
}

Result<bool> Cache::debug(std::string_view client_key, Item* out, bool* fetched, int64_t* idle) {
  const StoreKey key(client_key);
  Shard& s = shard_of(key);
  std::lock_guard<std::mutex> l(s.mu);
  *fetched = false;
  *idle = 0;
  if (auto e = s.index.find(std::string(std::string_view(key))); e != s.index.end()) {
    *fetched = e->second.fetched;
    *idle = now() - start_ - e->second.atime;
  }
  return read_locked(s, key, out, nullptr);
}

// A set with no room for its value removes the old one: memcached does, so
// that a failed set never leaves stale data to be read (its other modes
// keep the item).
Result<StoreResult> Cache::no_memory(Shard& s, StoreMode mode, std::string_view key) {
  // (The index answers for a key it does not hold once it is rebuilt.)
  const bool maybe_held = !index_ready_.load(std::memory_order_acquire) ||
                          s.index.find(std::string(key)) != s.index.end();
  if (mode == StoreMode::kSet && maybe_held) PM_TRY(remove_locked(s, key));
  return StoreResult::kNoMemory;
}

Result<StoreResult> Cache::store(StoreMode mode, std::string_view client_key, uint32_t flags,
                                 int64_t exptime, std::string_view data,
                                 std::optional<uint64_t> cas, uint64_t* cas_out, uint32_t state) {
  n_->cmd_set++;
  if (data.size() > o_.item_max) return StoreResult::kTooLarge;
  const StoreKey key(client_key);
  Shard& s = shard_of(key);
  {
    std::lock_guard<std::mutex> l(s.mu);
    Item cur;
    bool found = false, stale = false;
    if (mode != StoreMode::kSet) {
      Result<bool> r = read_locked(s, key, &cur, nullptr);
      if (!r.ok()) return r.status();
      found = *r;
    }
    switch (mode) {
      case StoreMode::kSet:
        break;
      case StoreMode::kAdd:
        if (found) return StoreResult::kNotStored;
        break;
      case StoreMode::kReplace:
      case StoreMode::kAppend:
      case StoreMode::kPrepend:
        if (!found) return StoreResult::kNotStored;
        // ms with C, the binary protocol's CAS (C0: no compare, as
        // memcached, which counts no cas command here).
        if (cas.value_or(0) != 0 && cur.cas != *cas) return StoreResult::kExists;
        break;
      case StoreMode::kCas:
        if (!found) {
          n_->cas_misses++;
          return StoreResult::kNotFound;
        }
        // ms I: an older unique still stores, as stale data (memcached:
        // a late writer of an invalidated item).
        stale = (state & kStale) != 0 && cas.value_or(0) != 0 && *cas < cur.cas;
        if (cur.cas != cas.value_or(0) && !stale) {
          n_->cas_badval++;
          return StoreResult::kExists;
        }
        n_->cas_hits++;
        break;
    }
    Item it;
    // (An appended item is a new one in memcached: not binary, not stale.)
    if (mode != StoreMode::kAppend && mode != StoreMode::kPrepend) it.state = state & kKeyBinary;
    if (mode == StoreMode::kAppend || mode == StoreMode::kPrepend) {
      // memcached keeps the item's flags and expiry, and refuses one that
      // would grow past the item limit with NOT_STORED.
      if (cur.data.size() + data.size() > o_.item_max) return StoreResult::kNotStored;
      it.flags = cur.flags;
      it.exptime = cur.exptime;
      it.data = mode == StoreMode::kAppend ? cur.data + std::string(data)
                                            : std::string(data) + cur.data;
    } else {
      it.flags = flags;
      it.exptime = stale ? cur.exptime : absolute(exptime);
      it.data.assign(data);
    }
    if (stale) it.state |= kStale | (cur.state & kTokenSent);
    if (!o_.evict && bytes_.load() + entry_bytes(key, it.data.size()) > o_.memory_limit) {
      return no_memory(s, mode, key);
    }
    Result<uint64_t> c = next_cas();
    if (!c.ok()) return c.status();
    it.cas = *c;
    if (cas_out != nullptr) *cas_out = it.cas;
    if (it.exptime < 0) {  // stored and expired at once: memcached's negative expiry
      PM_TRY(remove_locked(s, key));
      return StoreResult::kStored;
    }
    Status st = write_locked(s, key, it, now());
    if (st.code() == pm::Code::kNoSpace) return no_memory(s, mode, key);
    PM_TRY(st);
    n_->total_items++;
  }
  PM_TRY(evict_if_over(key, entry_bytes(key, data.size())));
  return StoreResult::kStored;
}

Result<DeleteResult> Cache::remove(std::string_view client_key, std::optional<uint64_t> cas,
                                   bool count) {
  const StoreKey key(client_key);
  Shard& s = shard_of(key);
  std::lock_guard<std::mutex> l(s.mu);
  Item cur;
  Result<bool> found = read_locked(s, key, &cur, nullptr);
  if (!found.ok()) return found.status();
  if (count && !*found) n_->delete_misses++;
  if (!*found) return DeleteResult::kNotFound;
  if (cas && cur.cas != *cas) return DeleteResult::kExists;  // (no hit, as memcached)
  if (count) n_->delete_hits++;
  PM_TRY(remove_locked(s, key));
  return DeleteResult::kDeleted;
}

Result<DeleteResult> Cache::invalidate(std::string_view client_key, std::optional<uint64_t> cas,
                                       const int64_t* touch) {
  const StoreKey key(client_key);
  Shard& s = shard_of(key);
  std::lock_guard<std::mutex> l(s.mu);
  Item it;
  int64_t time = 0;
  Result<bool> found = read_locked(s, key, &it, &time);
  if (!found.ok()) return found.status();
  if (!*found) return DeleteResult::kNotFound;
  if (cas && it.cas != *cas) return DeleteResult::kExists;
  it.state = (it.state | kStale) & ~kTokenSent;  // the next reader wins the recache
  if (touch != nullptr) it.exptime = absolute(*touch);
  if (it.exptime < 0) {
    PM_TRY(remove_locked(s, key));
    return DeleteResult::kDeleted;
  }
  Result<uint64_t> c = next_cas();
  if (!c.ok()) return c.status();
  it.cas = *c;
  PM_TRY(write_locked(s, key, it, time, false));
  return DeleteResult::kDeleted;
}

Result<bool> Cache::touch(std::string_view client_key, int64_t exptime) {
  const StoreKey key(client_key);
  Shard& s = shard_of(key);
  std::lock_guard<std::mutex> l(s.mu);
  n_->cmd_touch++;
  Item it;
  int64_t time = 0;
  Result<bool> found = read_locked(s, key, &it, &time, true);
  if (!found.ok()) return found;
  (*found ? n_->touch_hits : n_->touch_misses)++;
  if (!*found) return false;
  it.exptime = absolute(exptime);
  if (it.exptime < 0) {
    PM_TRY(remove_locked(s, key));
  } else {
    PM_TRY(write_locked(s, key, it, time, false));
  }
  return true;
}

Result<DeltaResult> Cache::delta(std::string_view client_key, bool incr, uint64_t by,
                                 uint64_t* value, const DeltaOptions& o, Item* result) {
  const StoreKey key(client_key);
  Result<DeltaResult> r = delta_locked(key, incr, by, value, o, result);
  if (r.ok() && *r == DeltaResult::kCreated) {
    PM_TRY(evict_if_over(key, entry_bytes(key, result != nullptr ? result->data.size() : 20)));
  }
  return r;
}

Result<DeltaResult> Cache::delta_locked(std::string_view key, bool incr, uint64_t by,
                                        uint64_t* value, const DeltaOptions& o, Item* result) {
  Shard& s = shard_of(key);
  std::lock_guard<std::mutex> l(s.mu);
  Item it;
  int64_t time = 0;
  Result<bool> found = read_locked(s, key, &it, &time);
  if (!found.ok()) return found.status();
  if (!*found && o.vivify) {  // created with the initial value, no delta applied
    it.data = std::to_string(o.initial);
    if (!o_.evict && bytes_.load() + entry_bytes(key, it.data.size()) > o_.memory_limit) {
      return DeltaResult::kNoMemory;
    }
    it.exptime = absolute(o.touch != nullptr && o.touch_last ? *o.touch : o.vivify_exptime);
    Result<uint64_t> c = next_cas();
    if (!c.ok()) return c.status();
    it.cas = *c;
    PM_TRY(write_locked(s, key, it, now()));
    n_->total_items++;
    *value = o.initial;
    if (result != nullptr) *result = it;
    return DeltaResult::kCreated;
  }
  if (!*found) {
    (incr ? n_->incr_misses : n_->decr_misses)++;
    return DeltaResult::kNotFound;
  }
  // As memcached's do_add_delta: an empty value is no number, whatever
  // the CAS; C0 compares nothing.
  if (it.data.empty()) return DeltaResult::kNonNumeric;
  if (o.compare_cas.value_or(0) != 0 && it.cas != *o.compare_cas) return DeltaResult::kExists;
  if (o.exptime_before != nullptr) *o.exptime_before = it.exptime;
  if (o.touch != nullptr) it.exptime = absolute(*o.touch);
  // memcached takes the leading number (what follows white space is
  // ignored: its own padding, below, is spaces).
  uint64_t v;
  if (!parse_u64(it.data, &v)) return DeltaResult::kNonNumeric;
  (incr ? n_->incr_hits : n_->decr_hits)++;
  v = incr ? v + by : (by > v ? 0 : v - by);  // incr wraps at 2^64, decr stops at 0
  std::string out = std::to_string(v);
  // As memcached: a shorter number is written over the old one, padded with
  // spaces to its length; a longer one makes a new item (not yet read).
  const bool grew = out.size() > it.data.size();
  if (out.size() < it.data.size()) out.resize(it.data.size(), ' ');
  it.data = std::move(out);
  if (grew) it.state = 0;  // (a new item: not stale, its key not binary)
  Result<uint64_t> c = next_cas();
  if (!c.ok()) return c.status();
  it.cas = *c;
  PM_TRY(write_locked(s, key, it, time, grew));
  if (grew) n_->total_items++;  // memcached links a new item
  *value = v;
  if (result != nullptr) *result = it;
  return DeltaResult::kOk;
}

Status Cache::flush_all(int64_t delay) {
  n_->cmd_flush++;
  // A delay is an exptime: past 30 days, a unix time (one passed: now).
  const int64_t at = delay > 0 ? absolute(delay) : 0;
  if (at > now()) {
    flush_time_ = at;
  } else {
    // As memcached: a flush now replaces a delayed one still to come (what
    // one that already came removed, this one removes too).
    std::lock_guard<std::mutex> l(cas_mu_);
    flush_cas_ = cas_next_ - 1;
    flush_time_ = 0;
  }
  char v[16];
  const uint64_t fc = flush_cas_.load();
  const int64_t ft = flush_time_.load();
  std::memcpy(v, &fc, 8);
  std::memcpy(v + 8, &ft, 8);
  PM_TRY(store_->put(kFlushKey, std::string_view(v, sizeof v)));
  bg_cv_.notify_all();  // the background sweep removes them
  return Status();
}

Status Cache::sync() { return store_->sync(); }
Status Cache::checkpoint() { return store_->checkpoint(); }

void Cache::dump(size_t shard, const std::function<void(const DumpedItem&)>& fn) {
  Shard& s = *shards_[shard % kShards];
  std::lock_guard<std::mutex> l(s.mu);
  for (const auto& [k, e] : s.index) {
    if (own_record(k) || dead(e.exptime, e.time, e.cas)) continue;
    const std::string_view key = k[0] == '\0' ? std::string_view(k).substr(1) : k;  // StoreKey
    fn(DumpedItem{key, e.exptime, start_ + e.atime, e.cas, e.fetched, e.bytes,
                  e.bytes - entry_bytes(k, 0)});
  }
}

uint64_t Cache::sweep(size_t first_shard, size_t shards) {
  uint64_t removed = 0;
  std::vector<std::string> dead_keys;
  for (size_t i = 0; i < shards; i++) {
    Shard& s = *shards_[(first_shard + i) % kShards];
    std::lock_guard<std::mutex> l(s.mu);
    dead_keys.clear();
    for (const auto& [k, e] : s.index) {
      if (dead(e.exptime, e.time, e.cas)) dead_keys.push_back(k);
    }
    for (const std::string& k : dead_keys) {
      if (!remove_locked(s, k).ok()) break;
      removed++;
    }
  }
  n_->reclaimed += removed;
  return removed;
}

Status Cache::evict_if_over(std::string_view keep, uint64_t added) {
  if (!o_.evict) return Status();
  thread_local std::mt19937_64 rng(std::random_device{}());
  const uint64_t budget = added == UINT64_MAX ? UINT64_MAX : 2 * added;
  uint64_t freed = 0;
  for (int attempts = 0; bytes_.load(std::memory_order_relaxed) > o_.memory_limit &&
                         freed < budget && attempts < 10000;
       attempts++) {
    // Approximate LRU (as Redis does): of one item from each of a few
    // shards picked at random, the one used least recently goes.
    std::string victim;
    uint32_t oldest = UINT32_MAX;
    Shard* from = nullptr;
    // Eight samples from shards that hold items: with fewer items than
    // shards most picks are empty, and counting those left one or two
    // candidates, so a just-used item was often the one to go.
    for (int sample = 0, tries = 0; sample < 8 && tries < 64; tries++) {
      Shard& s = *shards_[rng() % kShards];
      std::lock_guard<std::mutex> l(s.mu);
      if (s.index.empty()) continue;
      sample++;
      const size_t buckets = s.index.bucket_count();
      for (size_t b = rng() % buckets, n = 0; n < buckets; b = (b + 1) % buckets, n++) {
        if (s.index.begin(b) == s.index.end(b)) continue;
        const auto& [key, e] = *s.index.begin(b);
        if (key == keep) continue;
        if (e.atime < oldest) {
          oldest = e.atime;
          victim = key;
          from = &s;
        }
        break;
      }
    }
    if (from == nullptr) continue;
    std::lock_guard<std::mutex> l(from->mu);
    auto e = from->index.find(victim);
    if (e == from->index.end() || e->second.atime != oldest) continue;  // used meanwhile
    freed += e->second.bytes;
    PM_TRY(remove_locked(*from, victim));
    n_->evictions++;
  }
  return Status();
}

void Cache::rebuild_index() {
  const auto t0 = std::chrono::steady_clock::now();
  uint64_t n = 0;
  Status st;
  try {  // a thread of its own: nothing may throw out of it
    st = store_->scan("", [&](std::string_view key, std::string_view v) {
      Header h;
      uint32_t state;
      if (own_record(key) || !decode(v, &h, &state)) return true;
      Shard& s = shard_of(key);
      std::lock_guard<std::mutex> l(s.mu);
      std::string k(key);
      if (s.index.count(k) != 0 || s.removed_during_rebuild.count(k) != 0) return true;
      const uint64_t bytes = entry_bytes(key, v.size() - sizeof h);
      s.index.emplace(std::move(k),
                      Entry{static_cast<uint32_t>(bytes), 0, false, h.exptime, h.time, h.cas});
      bytes_ += bytes;
      items_++;
      n++;
      return !stopping_.load(std::memory_order_relaxed);
    });
  } catch (const std::bad_alloc&) {
    st = Status::no_space("out of memory (DRAM) for the index of the cache's items");
  }
  if (!st.ok() && o_.logger) {
    o_.logger(pm::LogLevel::kError, "index rebuild of " + path_ + ": " + st.to_string());
  }
  {
    std::lock_guard<std::mutex> l(bg_mu_);  // wait_for_index() sees it, or is woken
    index_ready_.store(st.ok(), std::memory_order_release);
    rebuild_done_ = true;
    if (!stopping_) rebuild_error_ = st;
    if (index_done_) index_done_();
  }
  for (auto& s : shards_) {
    std::lock_guard<std::mutex> l(s->mu);
    std::unordered_set<std::string>().swap(s->removed_during_rebuild);
  }
  if (o_.logger) {
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                        std::chrono::steady_clock::now() - t0)
                        .count();
    o_.logger(pm::LogLevel::kInfo,
              "indexed " + std::to_string(n) + " items in " + std::to_string(ms) + " ms");
  }
  bg_cv_.notify_all();
}

Status Cache::index_error() {
  std::lock_guard<std::mutex> l(bg_mu_);
  return rebuild_error_;
}

void Cache::on_index_done(std::function<void()> f) {
  std::lock_guard<std::mutex> l(bg_mu_);
  index_done_ = std::move(f);
  if (index_done_ && rebuild_done_) index_done_();
}

void Cache::wait_for_index() {
  std::unique_lock<std::mutex> l(bg_mu_);
  bg_cv_.wait(l, [&] { return rebuild_done_; });
}

void Cache::background() {
  size_t next = 0;
  uint64_t seen_flush = flush_cas_.load();
  std::unique_lock<std::mutex> l(bg_mu_);
  while (!stopping_) {
    bg_cv_.wait_for(l, std::chrono::seconds(1));
    if (stopping_ || !index_ready_.load()) continue;
    l.unlock();
    // A tenth of the index per second; all of it after a flush_all.
    const bool flushed = flush_cas_.load() != seen_flush;
    seen_flush = flush_cas_.load();
    const size_t count = flushed ? kShards : kShards / 10;
    try {  // a thread of its own: out of DRAM, this round is skipped
      sweep(next, count);
      next = (next + count) % kShards;
      // What a restart with a smaller -m left over the limit goes here, all
      // of it (a write evicts only about what it adds).
      while (!stopping_.load(std::memory_order_relaxed) &&
             bytes_.load(std::memory_order_relaxed) > o_.memory_limit) {
        const uint64_t before = bytes_.load(std::memory_order_relaxed);
        if (!evict_if_over({}, 1 << 20).ok() || bytes_.load(std::memory_order_relaxed) >= before) {
          break;
        }
      }
    } catch (const std::bad_alloc&) {
    }
    l.lock();
  }
}

CacheStats Cache::stats() {
  CacheStats s;
  s.curr_items = items_.load();
  s.bytes = bytes_.load();
  s.index_ready = index_ready_.load();
  const Counters& n = *n_;
  s.total_items = n.total_items;
  s.get_hits = n.get_hits;
  s.get_misses = n.get_misses;
  s.get_expired = n.get_expired;
  s.get_flushed = n.get_flushed;
  s.cmd_get = n.cmd_get;
  s.cmd_set = n.cmd_set;
  s.cmd_touch = n.cmd_touch;
  s.cmd_flush = n.cmd_flush;
  s.touch_hits = n.touch_hits;
  s.touch_misses = n.touch_misses;
  s.delete_hits = n.delete_hits;
  s.delete_misses = n.delete_misses;
  s.incr_hits = n.incr_hits;
  s.incr_misses = n.incr_misses;
  s.decr_hits = n.decr_hits;
  s.decr_misses = n.decr_misses;
  s.cas_hits = n.cas_hits;
  s.cas_misses = n.cas_misses;
  s.cas_badval = n.cas_badval;
  s.evictions = n.evictions;
  s.reclaimed = n.reclaimed;
  return s;
}

void Cache::reset_stats() {
  Counters& n = *n_;
  for (auto* c : {&n.total_items, &n.get_hits, &n.get_misses, &n.get_expired, &n.get_flushed,
                  &n.cmd_get, &n.cmd_set, &n.cmd_touch, &n.cmd_flush, &n.touch_hits,
                  &n.touch_misses, &n.delete_hits, &n.delete_misses, &n.incr_hits, &n.incr_misses,
                  &n.decr_hits, &n.decr_misses, &n.cas_hits, &n.cas_misses, &n.cas_badval,
                  &n.evictions, &n.reclaimed}) {
    c->store(0);
  }
}

}  // namespace pmcached
