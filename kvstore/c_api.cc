// C API: Status -> pm_errcode plus a thread-local message, as libpm's c_api.cc.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_set>
#include <utility>
#include <vector>

#include "kv/kv.h"
#include "kv/store.h"
#include "libpm/c_guard.h"

// Transactions and iterators hold the store's C++ objects; kv_close ends
// those still open (an abort, an iterator dropped) before the store goes,
// so that a later call on them is PM_EINVAL, not a use after free.
struct kv_txn;
struct kv_iter;

struct kv_store {
  std::unique_ptr<kv::Store> s;
  std::mutex mu;  // guards txns, iters: those not yet freed
  std::unordered_set<kv_txn*> txns;
  std::unordered_set<kv_iter*> iters;
};

struct kv_txn {
  std::unique_ptr<kv::Transaction> t;  // null once its store was closed
  kv_store* store;                     // null once its store was closed
};

struct kv_cursor {
  std::vector<std::pair<std::string, std::string>> pairs;  // sorted by key
  size_t next = 0;
};

struct kv_iter {
  std::unique_ptr<kv::Store::Iterator> it;  // null once its store was closed
  kv_store* store = nullptr;                // null once its store was closed
  std::string key, value;  // the pair kv_iter_next returned last
  // The last kv_iter_seek failed: no position until the next one (going on
  // from the old position would pass for the keys after the one asked).
  pm::Status bad_seek;
};

namespace {

// Registers h with its store (kv_close ends it); forget() undoes it.
template <typename H>
void remember(std::unordered_set<H*>* set, std::mutex* mu, H* h) {
  std::lock_guard<std::mutex> l(*mu);
  set->insert(h);
}
void forget(kv_txn* t) {
  if (t == nullptr || t->store == nullptr) return;
  std::lock_guard<std::mutex> l(t->store->mu);
  t->store->txns.erase(t);
}
void forget(kv_iter* it) {
  if (it == nullptr || it->store == nullptr) return;
  std::lock_guard<std::mutex> l(it->store->mu);
  it->store->iters.erase(it);
}

// A transaction or iterator whose store kv_close closed.
pm::Status store_closed(const char* what) {
  return pm::Status::invalid_argument(std::string(what) + ": its store was closed");
}

thread_local std::string t_error;
thread_local pm_errcode t_code = PM_OK;

pm_errcode fail(const pm::Status& s) {
  pm::set_last_error(&t_error, s);
  t_code = static_cast<pm_errcode>(s.code());
  return t_code;
}

pm_errcode code_of(const pm::Status& s) { return s.ok() ? PM_OK : fail(s); }

// Runs fn, which returns a Status; no exception crosses into C. The string
// copies inside the store throw std::bad_alloc and, for a length past what
// a string holds, std::length_error; starting threads std::system_error
// (libpm/c_guard.h).
template <typename F>
pm_errcode guarded(F&& fn) {
  return code_of(pm::status_of(std::forward<F>(fn)));
}

// A (pointer, length) argument: NULL only with length 0. Keys (and seek
// positions and ends, which compare with keys) are at most 65535 bytes in
// any store, values under 4 GiB: longer ones are refused before anything
// copies them (or computes their end).
pm::Status bytes(const char* p, size_t n, const char* what, std::string_view* out) {
  if (p == nullptr && n != 0) {
    return pm::Status::invalid_argument(std::string(what) + " is NULL with length " +
                                        std::to_string(n));
  }
  *out = p == nullptr ? std::string_view() : std::string_view(p, n);
  return pm::Status();
}
pm::Status key_bytes(const char* p, size_t n, const char* what, std::string_view* out) {
  if (n > 65535) {
    return pm::Status::invalid_argument(std::string(what) + " of " + std::to_string(n) +
                                        " bytes: no store takes keys over 65535 bytes");
  }
  return bytes(p, n, what, out);
}
// Values: max_value_bytes is 32 bits.
pm::Status value_bytes(const char* p, size_t n, std::string_view* out) {
  if (n > UINT32_MAX) {
    return pm::Status::invalid_argument("value of " + std::to_string(n) +
                                        " bytes: no store takes values of 4 GiB or more");
  }
  return bytes(p, n, "value", out);
}

// For the functions that return a handle: NULL and the message on failure.
template <typename T, typename F>
T* made(F&& fn) {
  T* out = nullptr;
  pm_errcode e = guarded([&] { return fn(&out); });
  if (e == PM_OK) return out;
  delete out;
  return nullptr;
}

// The durability a C caller stored, read as an integer: a C++ enum object
// holding a value outside its enumerators (a C caller may store any) is
// undefined behaviour to read.
std::underlying_type_t<kv_durability> durability_of(const kv_options* in) {
  std::underlying_type_t<kv_durability> d = KV_DURABILITY_SYNC;
  if (in != nullptr) std::memcpy(&d, &in->durability, sizeof d);
  return d;
}

kv::StoreOptions to_options(const kv_options* in) {
  kv::StoreOptions o;
  if (in == nullptr) return o;
  if (in->logs != 0) o.logs = in->logs;
  if (in->log_bytes != 0) o.log_bytes = in->log_bytes;
  if (in->max_key_bytes != 0) o.max_key_bytes = in->max_key_bytes;
  if (in->max_value_bytes != 0) o.max_value_bytes = in->max_value_bytes;
  if (in->initial_heap_bytes != 0) o.initial_heap_bytes = in->initial_heap_bytes;
  if (in->max_heap_bytes != 0) o.max_heap_bytes = in->max_heap_bytes;
  o.create_if_missing = in->must_exist == 0;
  o.durability = static_cast<kv::Durability>(durability_of(in));  // checked by kv_open
  o.read_only = in->read_only != 0;
  return o;
}

}  // namespace

extern "C" {

kv_store* kv_open(const char* path, const kv_options* opts) {
  return made<kv_store>([&](kv_store** out) -> pm::Status {
    PM_TRY(pm::non_null(path, "path"));
    const auto durability = durability_of(opts);
    if (durability != KV_DURABILITY_SYNC && durability != KV_DURABILITY_ASYNC &&
        durability != KV_DURABILITY_SYNC_ON_PMEM) {
      return pm::Status::invalid_argument("unknown durability " + std::to_string(durability));
    }
    pm::Result<std::unique_ptr<kv::Store>> r = kv::Store::open(path, to_options(opts));
    if (!r.ok()) return r.status();
    *out = new kv_store;
    (*out)->s = std::move(*r);
    return pm::Status();
  });
}

void kv_close(kv_store* s) {
  if (s == nullptr) return;
  {
    std::lock_guard<std::mutex> l(s->mu);
    for (kv_txn* t : s->txns) {  // aborted: the store's objects go before it
      t->t.reset();
      t->store = nullptr;
    }
    for (kv_iter* it : s->iters) {
      it->it.reset();
      it->store = nullptr;
    }
  }
  delete s;
}

pm_errcode kv_put(kv_store* s, const char* key, size_t klen, const char* val, size_t vlen) {
  return guarded([&] {
    std::string_view k, v;
    PM_TRY(pm::non_null(s, "store"));
    PM_TRY(key_bytes(key, klen, "key", &k));
    PM_TRY(value_bytes(val, vlen, &v));
    return s->s->put(k, v);
  });
}

pm_errcode kv_get(kv_store* s, const char* key, size_t klen, char** val, size_t* vlen) {
  std::string v;
  pm_errcode e = guarded([&] {
    std::string_view k;
    PM_TRY(pm::non_null(s, "store"));
    PM_TRY(key_bytes(key, klen, "key", &k));
    return s->s->get(k, val == nullptr && vlen == nullptr ? nullptr : &v);
  });
  if (e != PM_OK) return e;
  if (val != nullptr) {
    // One byte more: a NUL after the value, and never malloc(0).
    char* out = static_cast<char*>(std::malloc(v.size() + 1));
    if (out == nullptr) return fail(pm::Status::no_space("out of memory"));
    std::memcpy(out, v.data(), v.size());
    out[v.size()] = '\0';
    *val = out;
  }
  if (vlen != nullptr) *vlen = v.size();
  return PM_OK;
}

pm_errcode kv_remove(kv_store* s, const char* key, size_t klen) {
  return guarded([&] {
    std::string_view k;
    PM_TRY(pm::non_null(s, "store"));
    PM_TRY(key_bytes(key, klen, "key", &k));
    return s->s->remove(k);
  });
}

pm_errcode kv_sync(kv_store* s) {
  return guarded([&] {
    PM_TRY(pm::non_null(s, "store"));
    return s->s->sync();
  });
}

pm_errcode kv_checkpoint(kv_store* s) {
  return guarded([&] {
    PM_TRY(pm::non_null(s, "store"));
    return s->s->checkpoint();
  });
}

kv_txn* kv_begin(kv_store* s) {
  return made<kv_txn>([&](kv_txn** out) {
    PM_TRY(pm::non_null(s, "store"));
    *out = new kv_txn{s->s->begin(), s};
    remember(&s->txns, &s->mu, *out);
    return pm::Status();
  });
}

pm_errcode kv_txn_put(kv_txn* t, const char* key, size_t klen, const char* val, size_t vlen) {
  return guarded([&] {
    std::string_view k, v;
    PM_TRY(pm::non_null(t, "transaction"));
    if (t->t == nullptr) return store_closed("transaction");
    PM_TRY(key_bytes(key, klen, "key", &k));
    PM_TRY(value_bytes(val, vlen, &v));
    return t->t->put(k, v);
  });
}

pm_errcode kv_txn_remove(kv_txn* t, const char* key, size_t klen) {
  return guarded([&] {
    std::string_view k;
    PM_TRY(pm::non_null(t, "transaction"));
    if (t->t == nullptr) return store_closed("transaction");
    PM_TRY(key_bytes(key, klen, "key", &k));
    return t->t->remove(k);
  });
}

pm_errcode kv_commit(kv_txn* t) {
  forget(t);
  std::unique_ptr<kv_txn> owned(t);
  return guarded([&] {
    PM_TRY(pm::non_null(t, "transaction"));
    if (t->t == nullptr) return store_closed("transaction");
    return t->t->commit();
  });
}

void kv_abort(kv_txn* t) {  // an uncommitted Transaction aborts
  forget(t);
  delete t;
}

kv_cursor* kv_cursor_open(kv_store* s, const char* prefix, size_t plen) {
  return made<kv_cursor>([&](kv_cursor** out) {
    std::string_view p;
    PM_TRY(pm::non_null(s, "store"));
    PM_TRY(key_bytes(prefix, plen, "prefix", &p));
    *out = new kv_cursor;
    return s->s->scan(p, [&](std::string_view k, std::string_view v) {
      (*out)->pairs.emplace_back(k, v);  // in key order
      return true;
    });
  });
}

int kv_cursor_next(kv_cursor* c, const char** key, size_t* klen, const char** val, size_t* vlen) {
  if (c == nullptr || c->next == c->pairs.size()) return 0;
  const auto& [k, v] = c->pairs[c->next++];
  if (key != nullptr) *key = k.data();
  if (klen != nullptr) *klen = k.size();
  if (val != nullptr) *val = v.data();
  if (vlen != nullptr) *vlen = v.size();
  return 1;
}

void kv_cursor_close(kv_cursor* c) { delete c; }

kv_iter* kv_iter_open(kv_store* s, const char* end, size_t elen) {
  return made<kv_iter>([&](kv_iter** out) {
    std::string_view e;
    PM_TRY(pm::non_null(s, "store"));
    PM_TRY(key_bytes(end, elen, "end", &e));
    *out = new kv_iter;
    (*out)->it = s->s->iterator(e);
    (*out)->it->seek({});
    PM_TRY((*out)->it->status());
    (*out)->store = s;
    remember(&s->iters, &s->mu, *out);  // last: made() frees it on a failure
    return pm::Status();
  });
}

pm_errcode kv_iter_seek(kv_iter* it, const char* key, size_t klen) {
  return guarded([&] {
    std::string_view k;
    PM_TRY(pm::non_null(it, "iterator"));
    if (it->it == nullptr) return store_closed("iterator");
    const pm::Status arg = key_bytes(key, klen, "key", &k);
    it->bad_seek = arg.ok() ? arg : arg.with_context("the last kv_iter_seek failed: seek again");
    PM_TRY(arg);
    it->it->seek(k);
    return it->it->status();
  });
}

int kv_iter_next(kv_iter* it, const char** key, size_t* klen, const char** val, size_t* vlen) {
  int r = 0;
  pm_errcode e = guarded([&] {
    PM_TRY(pm::non_null(it, "iterator"));
    if (it->it == nullptr) return store_closed("iterator");
    PM_TRY(it->bad_seek);
    if (!it->it->valid()) return it->it->status();
    it->key = it->it->key();
    it->value = it->it->value();
    it->it->next();
    r = 1;
    return pm::Status();
  });
  if (e != PM_OK) return -1;
  if (r == 1) {
    if (key != nullptr) *key = it->key.data();
    if (klen != nullptr) *klen = it->key.size();
    if (val != nullptr) *val = it->value.data();
    if (vlen != nullptr) *vlen = it->value.size();
  }
  return r;
}

void kv_iter_close(kv_iter* it) {
  forget(it);
  delete it;
}

pm_errcode kv_get_stats(kv_store* s, kv_stats* out) {
  kv::StoreStats st;
  pm_errcode e = guarded([&] {
    PM_TRY(pm::non_null(s, "store"));
    PM_TRY(pm::non_null(out, "stats"));
    st = s->s->stats();
    return pm::Status();
  });
  if (e != PM_OK) return e;
  *out = kv_stats{};
  out->keys = st.keys;
  out->puts = st.puts;
  out->removes = st.removes;
  out->gets = st.gets;
  out->misses = st.misses;
  out->frontend_items = st.frontend_items;
  out->frontend_bytes = st.frontend_bytes;
  out->backend_keys = st.backend_keys;
  out->container_used_bytes = st.container_used_bytes;
  out->container_file_bytes = st.container_file_bytes;
  out->log_bytes = st.log_bytes;
  out->log_used_bytes = st.log_used_bytes;
  out->epochs = st.epochs;
  out->recovered_records = st.recovered_records;
  out->is_pmem = st.is_pmem ? 1 : 0;
  out->durability = static_cast<kv_durability>(st.durability);
  return PM_OK;
}

void kv_free(void* p) { std::free(p); }

const char* kv_errormsg(void) { return t_error.c_str(); }

pm_errcode kv_lasterror(void) { return t_code; }

}  // extern "C"
