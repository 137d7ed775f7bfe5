// C API: Status -> pm_errcode plus a thread-local message.
#include <algorithm>
#include <cstdio>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>

#include "libpm/c_guard.h"
#include "pm.h"
#include "pm/container.h"

struct pm_container {
  std::unique_ptr<pm::Container> c;
};

namespace {

thread_local std::string t_error;
thread_local pm_errcode t_code = PM_OK;

pm_errcode fail(const pm::Status& s) {
  pm::set_last_error(&t_error, s);
  t_code = static_cast<pm_errcode>(s.code());
  return t_code;
}

pm_errcode code_of(const pm::Status& s) { return s.ok() ? PM_OK : fail(s); }

pm::Status to_options(const pm_options* in, pm::Options* out) {
  if (in == nullptr) return pm::Status();
  if (in->initial_size != 0) out->initial_size = in->initial_size;
  if (in->max_size != 0) out->max_size = in->max_size;
  if (in->layout != nullptr) out->layout = in->layout;
  out->create_if_missing = in->create_if_missing != 0;
  if (in->raw_bytes != 0) out->raw_bytes = in->raw_bytes;
  out->release_after_commit = in->release_after_commit != 0;
  out->check_escapes_at_commit = in->check_escapes_at_commit != 0;
  out->uffd_chunk_mode_above = in->uffd_chunk_mode_above;
  out->read_only = in->read_only != 0;
  if (in->tracker != nullptr && !pm::parse_tracker(in->tracker, &out->tracker)) {
    return pm::Status::invalid_argument(std::string("unknown tracker '") + in->tracker + "'");
  }
  return pm::Status();
}

// Runs fn, which returns a Status; no exception crosses into C.
template <typename F>
pm_errcode guarded(F&& fn) {
  return code_of(pm::status_of(std::forward<F>(fn)));
}

using pm::non_null;

// For the functions that return a pointer: NULL and the message on failure.
template <typename T, typename F>
T* made(F&& fn) {
  T* out = nullptr;
  return guarded([&] { return fn(&out); }) == PM_OK ? out : nullptr;
}

template <typename F>
pm_container* open_with(const char* path, const pm_options* opts, F&& fn) {
  return made<pm_container>([&](pm_container** out) -> pm::Status {
    PM_TRY(non_null(path, "path"));
    pm::Options o;
    PM_TRY(to_options(opts, &o));
    auto r = fn(path, o);
    if (!r.ok()) return r.status();
    *out = new pm_container{std::move(*r)};
    return pm::Status();
  });
}

void* alloc_kind(pm_container* c, size_t n, pm::AllocKind kind) {
  return made<void>([&](void** out) -> pm::Status {
    PM_TRY(non_null(c, "container"));
    pm::Result<void*> r = c->c->alloc(n, kind);
    if (!r.ok()) return r.status();
    *out = *r;
    return pm::Status();
  });
}

std::string_view root_name(const char* name) {
  return name == nullptr ? std::string_view() : std::string_view(name);
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
  return guarded([&] {
    PM_TRY(non_null(path, "path"));
    return pm::Container::remove(path);
  });
}

pm_errcode pm_commit(pm_container* c) {
  return guarded([&] {
    PM_TRY(non_null(c, "container"));
    return c->c->commit();
  });
}

pm_errcode pm_abort(pm_container* c) {
  return guarded([&] {
    PM_TRY(non_null(c, "container"));
    return c->c->abort();
  });
}

void* pm_alloc(pm_container* c, size_t n) { return alloc_kind(c, n, pm::AllocKind::kObject); }
void* pm_alloc_data(pm_container* c, size_t n) { return alloc_kind(c, n, pm::AllocKind::kData); }

pm_errcode pm_free(pm_container* c, void* p) {
  return guarded([&] {
    PM_TRY(non_null(c, "container"));
    return c->c->free(p);
  });
}

pm_errcode pm_shrink(pm_container* c, void* p, size_t n) {
  return guarded([&] {
    PM_TRY(non_null(c, "container"));
    return c->c->shrink(p, n);
  });
}

pm_errcode pm_find_block(pm_container* c, const void* p, void** start, size_t* size) {
  return guarded([&] {
    PM_TRY(non_null(c, "container"));
    pm::Result<pm::BlockInfo> b = c->c->find_block(p);
    if (!b.ok()) return b.status();
    if (start != nullptr) *start = b->start;
    if (size != nullptr) *size = b->size;
    return pm::Status();
  });
}

pm_errcode pm_reserve(pm_container* c, uint64_t heap_bytes) {
  return guarded([&] {
    PM_TRY(non_null(c, "container"));
    return c->c->reserve(heap_bytes);
  });
}

uint64_t pm_generation(pm_container* c) { return c != nullptr ? c->c->generation() : 0; }

pm_errcode pm_raw_write(pm_container* c, uint64_t off, const void* src, size_t n) {
  return guarded([&] {
    PM_TRY(non_null(c, "container"));
    PM_TRY(non_null(src, "source"));
    return c->c->raw().write(off, src, n);
  });
}

pm_errcode pm_raw_persist(pm_container* c, uint64_t off, size_t n) {
  return guarded([&] {
    PM_TRY(non_null(c, "container"));
    return c->c->raw().persist(off, n);
  });
}

pm_errcode pm_raw_read(pm_container* c, uint64_t off, void* dst, size_t n) {
  return guarded([&] {
    PM_TRY(non_null(c, "container"));
    PM_TRY(non_null(dst, "destination"));
    return c->c->raw().read(off, dst, n);
  });
}

int pm_is_data(pm_container* c, const void* p) {
  int kind = -1;
  guarded([&] {
    PM_TRY(non_null(c, "container"));
    pm::Result<pm::BlockInfo> b = c->c->find_block(p);
    if (!b.ok()) return b.status();
    kind = b->kind == pm::AllocKind::kData ? 1 : 0;
    return pm::Status();
  });
  return kind;
}

void* pm_root(pm_container* c, const char* name) {
  return made<void>([&](void** out) {
    PM_TRY(non_null(c, "container"));
    *out = c->c->root(root_name(name));
    if (*out == nullptr) {  // NULL with PM_OK: no such root (pm.h)
      t_code = PM_OK;
      t_error.clear();
    }
    return pm::Status();
  });
}

pm_errcode pm_set_root(pm_container* c, const char* name, void* p) {
  return guarded([&] {
    PM_TRY(non_null(c, "container"));
    return c->c->set_root(p, root_name(name));
  });
}

// The three below return nothing; a NULL container is a no-op that leaves
// its message in pm_errormsg().
void pm_will_write(pm_container* c, const void* p, size_t n) {
  guarded([&] {
    PM_TRY(non_null(c, "container"));
    c->c->will_write(p, n);  // cut to the container, whatever the length
    return pm::Status();
  });
}

void pm_begin_mutation(pm_container* c) {
  guarded([&] {
    PM_TRY(non_null(c, "container"));
    c->c->begin_mutation();
    return pm::Status();
  });
}

void pm_end_mutation(pm_container* c) {
  guarded([&] {
    PM_TRY(non_null(c, "container"));
    if (!c->c->in_mutation()) {
      return pm::Status::invalid_argument(
          "pm_end_mutation: this thread is in no pm_begin_mutation of this container");
    }
    c->c->end_mutation();
    return pm::Status();
  });
}

pm_errcode pm_get_info(pm_container* c, pm_info* out) {
  return guarded([&] {
    PM_TRY(non_null(c, "container"));
    PM_TRY(non_null(out, "info output"));
    const pm::ContainerInfo i = c->c->info();
    *out = pm_info{};
    out->file_bytes = i.file_bytes;
    out->heap_bytes = i.heap_bytes;
    out->raw_bytes = i.raw_bytes;
    out->max_bytes = i.max_bytes;
    out->used_bytes = i.used_bytes;
    out->free_bytes = i.free_bytes;
    out->footprint_bytes = i.footprint_bytes;
    out->blocks = i.blocks;
    out->dirty_pages = i.dirty_pages;
    out->base_address = i.base_address;
    out->commits = i.commits;
    out->is_pmem = i.is_pmem ? 1 : 0;
    out->read_only = i.read_only ? 1 : 0;
    std::memcpy(out->tracker, i.tracker.data(),
                std::min(i.tracker.size(), sizeof out->tracker - 1));
    return pm::Status();
  });
}

pm_errcode pm_check(pm_container* c, pm_check_result* out) {
  return guarded([&] {
    PM_TRY(non_null(c, "container"));
    if (c->c->in_mutation()) {
      return pm::Status::busy("pm_check called between pm_begin_mutation and pm_end_mutation");
    }
    pm::CheckReport r = c->c->check();
    // The superblock's findings count as problems here (pm.h's struct has
    // no field of their own).
    r.problems.insert(r.problems.begin(), r.superblock.begin(), r.superblock.end());
    if (out != nullptr) {
      *out = pm_check_result{r.problems.size(), r.escaping.size(), r.blocks, r.used_bytes,
                             r.reachable_blocks};
    }
    if (r.problems.empty() && r.escaping.empty()) return pm::Status();
    std::string msg;
    for (size_t i = 0; i < r.problems.size() && i < 3; i++) {
      msg += (msg.empty() ? "" : "; ") + r.problems[i];
    }
    for (size_t i = 0; i < r.escaping.size() && i < 3; i++) {
      const pm::EscapingPointer& e = r.escaping[i];
      char at[96];  // addresses in hex, as Container::check's callers print them
      std::snprintf(at, sizeof at, "escaping pointer at object %#llx + %llu -> %#llx",
                    static_cast<unsigned long long>(e.object),
                    static_cast<unsigned long long>(e.offset),
                    static_cast<unsigned long long>(e.target));
      msg += (msg.empty() ? "" : "; ") + std::string(at) + " (" + e.where + ")";
    }
    const size_t shown = std::min<size_t>(r.problems.size(), 3) +
                         std::min<size_t>(r.escaping.size(), 3);
    const size_t more = r.problems.size() + r.escaping.size() - shown;
    if (more > 0) msg += "; and " + std::to_string(more) + " more";
    return pm::Status::corruption(msg);
  });
}

pm_errcode pm_collect(pm_container* c, int dry_run, pm_collect_result* out) {
  return guarded([&] {
    PM_TRY(non_null(c, "container"));
    pm::Result<pm::CollectReport> r = c->c->collect(dry_run != 0);
    if (!r.ok()) return r.status();
    if (out != nullptr) {
      *out = pm_collect_result{r->live_blocks, r->live_bytes, r->freed_blocks, r->freed_bytes};
    }
    return pm::Status();
  });
}

const char* pm_errormsg(void) { return t_error.c_str(); }

pm_errcode pm_lasterror(void) { return t_code; }

}  // extern "C"
