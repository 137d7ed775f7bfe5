// C API: Status -> pm_errcode plus a thread-local message, as libpm's c_api.cc.
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kv/kv.h"
#include "kv/store.h"

struct kv_store {
  std::unique_ptr<kv::Store> s;
};

struct kv_txn {
  std::unique_ptr<kv::Transaction> t;
};

struct kv_cursor {
  std::vector<std::pair<std::string, std::string>> pairs;  // sorted by key
  size_t next = 0;
};

struct kv_iter {
  std::unique_ptr<kv::Store::Iterator> it;
  std::string key, value;  // the pair kv_iter_next returned last
};

namespace {

thread_local std::string t_error;

pm_errcode fail(const pm::Status& s) {
  t_error = s.message();
  return static_cast<pm_errcode>(s.code());
}

pm_errcode code_of(const pm::Status& s) { return s.ok() ? PM_OK : fail(s); }

// Runs fn, which returns a Status, turning std::bad_alloc (from the
// std::string copies inside the store) into PM_ENOSPC.
template <typename F>
pm_errcode guarded(F&& fn) {
  try {
    return code_of(fn());
  } catch (const std::bad_alloc&) {
    return fail(pm::Status::no_space("out of memory"));
  }
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
  o.durability = static_cast<kv::Durability>(in->durability);
  o.read_only = in->read_only != 0;
  return o;
}

std::string_view bytes(const char* p, size_t n) {
  return p == nullptr ? std::string_view() : std::string_view(p, n);
}

}  // namespace

extern "C" {

kv_store* kv_open(const char* path, const kv_options* opts) {
  if (path == nullptr) {
    fail(pm::Status::invalid_argument("path is NULL"));
    return nullptr;
  }
  if (opts != nullptr && opts->durability != KV_DURABILITY_SYNC &&
      opts->durability != KV_DURABILITY_ASYNC && opts->durability != KV_DURABILITY_SYNC_ON_PMEM) {
    fail(pm::Status::invalid_argument("unknown durability " +
                                      std::to_string(static_cast<int>(opts->durability))));
    return nullptr;
  }
  try {
    pm::Result<std::unique_ptr<kv::Store>> r = kv::Store::open(path, to_options(opts));
    if (!r.ok()) {
      fail(r.status());
      return nullptr;
    }
    return new kv_store{std::move(*r)};
  } catch (const std::bad_alloc&) {
    fail(pm::Status::no_space("out of memory"));
    return nullptr;
  }
}

void kv_close(kv_store* s) { delete s; }

pm_errcode kv_put(kv_store* s, const char* key, size_t klen, const char* val, size_t vlen) {
  return guarded([&] { return s->s->put(bytes(key, klen), bytes(val, vlen)); });
}

pm_errcode kv_get(kv_store* s, const char* key, size_t klen, char** val, size_t* vlen) {
  std::string v;
  pm_errcode e = guarded([&] { return s->s->get(bytes(key, klen), &v); });
  if (e != PM_OK) return e;
  // One byte more: a NUL after the value, and never malloc(0).
  char* out = static_cast<char*>(std::malloc(v.size() + 1));
  if (out == nullptr) return fail(pm::Status::no_space("out of memory"));
  std::memcpy(out, v.data(), v.size());
  out[v.size()] = '\0';
  *val = out;
  *vlen = v.size();
  return PM_OK;
}

pm_errcode kv_remove(kv_store* s, const char* key, size_t klen) {
  return guarded([&] { return s->s->remove(bytes(key, klen)); });
}

pm_errcode kv_sync(kv_store* s) {
  return guarded([&] { return s->s->sync(); });
}

pm_errcode kv_checkpoint(kv_store* s) {
  return guarded([&] { return s->s->checkpoint(); });
}

kv_txn* kv_begin(kv_store* s) {
  try {
    return new kv_txn{s->s->begin()};
  } catch (const std::bad_alloc&) {
    fail(pm::Status::no_space("out of memory"));
    return nullptr;
  }
}

pm_errcode kv_txn_put(kv_txn* t, const char* key, size_t klen, const char* val, size_t vlen) {
  return guarded([&] { return t->t->put(bytes(key, klen), bytes(val, vlen)); });
}

pm_errcode kv_txn_remove(kv_txn* t, const char* key, size_t klen) {
  return guarded([&] { return t->t->remove(bytes(key, klen)); });
}

pm_errcode kv_commit(kv_txn* t) {
  std::unique_ptr<kv_txn> owned(t);
  return guarded([&] { return t->t->commit(); });
}

void kv_abort(kv_txn* t) { delete t; }  // an uncommitted Transaction aborts

kv_cursor* kv_cursor_open(kv_store* s, const char* prefix, size_t plen) {
  auto c = std::unique_ptr<kv_cursor>(new (std::nothrow) kv_cursor);
  if (c == nullptr) {
    fail(pm::Status::no_space("out of memory"));
    return nullptr;
  }
  pm_errcode e = guarded([&] {
    return s->s->scan(bytes(prefix, plen), [&](std::string_view k, std::string_view v) {
      c->pairs.emplace_back(k, v);  // in key order
      return true;
    });
  });
  return e == PM_OK ? c.release() : nullptr;
}

int kv_cursor_next(kv_cursor* c, const char** key, size_t* klen, const char** val, size_t* vlen) {
  if (c->next == c->pairs.size()) return 0;
  const auto& [k, v] = c->pairs[c->next++];
  *key = k.data();
  *klen = k.size();
  *val = v.data();
  *vlen = v.size();
  return 1;
}

void kv_cursor_close(kv_cursor* c) { delete c; }

kv_iter* kv_iter_open(kv_store* s, const char* end, size_t elen) {
  auto it = std::unique_ptr<kv_iter>(new (std::nothrow) kv_iter);
  if (it == nullptr) {
    fail(pm::Status::no_space("out of memory"));
    return nullptr;
  }
  pm_errcode e = guarded([&] {
    it->it = s->s->iterator(bytes(end, elen));
    it->it->seek({});
    return it->it->status();
  });
  return e == PM_OK ? it.release() : nullptr;
}

pm_errcode kv_iter_seek(kv_iter* it, const char* key, size_t klen) {
  return guarded([&] {
    it->it->seek(bytes(key, klen));
    return it->it->status();
  });
}

int kv_iter_next(kv_iter* it, const char** key, size_t* klen, const char** val, size_t* vlen) {
  int r = 0;
  pm_errcode e = guarded([&] {
    if (!it->it->valid()) return it->it->status();
    it->key = it->it->key();
    it->value = it->it->value();
    it->it->next();
    r = 1;
    return pm::Status();
  });
  if (e != PM_OK) return -1;
  if (r == 1) {
    *key = it->key.data();
    *klen = it->key.size();
    *val = it->value.data();
    *vlen = it->value.size();
  }
  return r;
}

void kv_iter_close(kv_iter* it) { delete it; }

pm_errcode kv_get_stats(kv_store* s, kv_stats* out) {
  kv::StoreStats st;
  pm_errcode e = guarded([&] {
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

}  // extern "C"
