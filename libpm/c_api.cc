// C API: Status -> pm_errcode plus a thread-local message.
#include <new>
#include <string>

#include "pm.h"
#include "pm/container.h"

struct pm_container {
  std::unique_ptr<pm::Container> c;
};

namespace {

thread_local std::string t_error;

pm_errcode fail(const pm::Status& s) {
  t_error = s.message();
  return static_cast<pm_errcode>(s.code());
}

pm_errcode code_of(const pm::Status& s) { return s.ok() ? PM_OK : fail(s); }

bool to_options(const pm_options* in, pm::Options* out) {
  if (in == nullptr) return true;
  if (in->initial_size != 0) out->initial_size = in->initial_size;
  if (in->max_size != 0) out->max_size = in->max_size;
  if (in->layout != nullptr) out->layout = in->layout;
  out->create_if_missing = in->create_if_missing != 0;
  if (in->tracker != nullptr && !pm::parse_tracker(in->tracker, &out->tracker)) {
    fail(pm::Status::invalid_argument(std::string("unknown tracker '") + in->tracker + "'"));
    return false;
  }
  return true;
}

template <typename F>
pm_container* open_with(const char* path, const pm_options* opts, F&& fn) {
  if (path == nullptr) {
    fail(pm::Status::invalid_argument("path is NULL"));
    return nullptr;
  }
  pm::Options o;
  if (!to_options(opts, &o)) return nullptr;
  try {
    auto r = fn(path, o);
    if (!r.ok()) {
      fail(r.status());
      return nullptr;
    }
    return new pm_container{std::move(*r)};
  } catch (const std::bad_alloc&) {
    fail(pm::Status::no_space("out of memory"));
    return nullptr;
  }
}

void* alloc_kind(pm_container* c, size_t n, pm::AllocKind kind) {
  try {
    pm::Result<void*> r = c->c->alloc(n, kind);
    if (!r.ok()) {
      fail(r.status());
      return nullptr;
    }
    return *r;
  } catch (const std::bad_alloc&) {
    fail(pm::Status::no_space("out of memory"));
    return nullptr;
  }
}

}  // namespace

extern "C" {

pm_container* pm_create(const char* path, const pm_options* opts) {
  return open_with(path, opts,
                   [](const char* p, const pm::Options& o) { return pm::Container::create(p, o); });
}

pm_container* pm_open(const char* path, const pm_options* opts) {
  return open_with(path, opts,
                   [](const char* p, const pm::Options& o) { return pm::Container::open(p, o); });
}

void pm_close(pm_container* c) { delete c; }

pm_errcode pm_remove(const char* path) {
  if (path == nullptr) return fail(pm::Status::invalid_argument("path is NULL"));
  return code_of(pm::Container::remove(path));
}

pm_errcode pm_commit(pm_container* c) { return code_of(c->c->commit()); }
pm_errcode pm_abort(pm_container* c) { return code_of(c->c->abort()); }

void* pm_alloc(pm_container* c, size_t n) { return alloc_kind(c, n, pm::AllocKind::kObject); }
void* pm_alloc_data(pm_container* c, size_t n) { return alloc_kind(c, n, pm::AllocKind::kData); }

pm_errcode pm_free(pm_container* c, void* p) { return code_of(c->c->free(p)); }

int pm_is_data(pm_container* c, const void* p) {
  pm::Result<pm::BlockInfo> b = c->c->find_block(p);
  if (!b.ok()) {
    fail(b.status());
    return -1;
  }
  return b->kind == pm::AllocKind::kData ? 1 : 0;
}

void* pm_root(pm_container* c, const char* name) {
  return c->c->root(name == nullptr ? std::string_view() : std::string_view(name));
}

pm_errcode pm_set_root(pm_container* c, const char* name, void* p) {
  return code_of(c->c->set_root(p, name == nullptr ? std::string_view() : std::string_view(name)));
}

void pm_will_write(pm_container* c, const void* p, size_t n) { c->c->will_write(p, n); }
void pm_begin_mutation(pm_container* c) { c->c->begin_mutation(); }
void pm_end_mutation(pm_container* c) { c->c->end_mutation(); }

const char* pm_errormsg(void) { return t_error.c_str(); }

}  // extern "C"
