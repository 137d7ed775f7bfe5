/* pm.h: the C API of libpm persistent containers.
 *
 * Mirrors pm::Container (pm/container.h): see there for the model. Functions
 * that can fail return NULL or a nonzero pm_errcode; pm_errormsg() and
 * pm_lasterror() then return the message and the code of the calling
 * thread's last failure. Thread-safe.
 * A NULL container or path, or a NULL output where one is required
 * (pm_get_info), is PM_EINVAL (NULL from the functions that return a
 * pointer, -1 from pm_is_data, a no-op with its message for the void
 * ones), never a crash; pm_close(NULL) and pm_free(c, NULL) do nothing. */
#ifndef PM_H_
#define PM_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pm_container pm_container;

/* Same values as pm::Code. */
typedef enum pm_errcode {
  PM_OK = 0,
  PM_ENOTFOUND = 1,
  PM_EINVAL = 2,
  PM_ECORRUPT = 3,
  PM_EIO = 4,
  PM_EBUSY = 5,
  PM_ENOSPC = 6,
  PM_ENOTSUP = 7,
  PM_EROFS = 8 /* needs write access: the file, or pm_options.read_only */
} pm_errcode;

/* Options for pm_create/pm_open; zero-initialise and set what you need.
 * Zero fields take the C++ defaults. */
typedef struct pm_options {
  uint64_t initial_size;
  uint64_t max_size;
  const char* layout;  /* may be NULL */
  const char* tracker; /* "auto", "uffd", "mprotect", "hints"; NULL = auto */
  int create_if_missing;
  uint64_t raw_bytes;          /* raw region, fixed at create (pm/raw_region.h) */
  int release_after_commit;    /* drop committed private pages (bounded DRAM) */
  int check_escapes_at_commit; /* pm_commit fails, naming them, on escaping pointers */
  uint64_t uffd_chunk_mode_above; /* pm::Options::uffd_chunk_mode_above (0: never) */
  int read_only; /* pm::Options::read_only: shared lock, changes refused (PM_EROFS) */
} pm_options;

pm_container* pm_create(const char* path, const pm_options* opts);
pm_container* pm_open(const char* path, const pm_options* opts);
void pm_close(pm_container* c); /* discards uncommitted changes */
pm_errcode pm_remove(const char* path);

pm_errcode pm_commit(pm_container* c);
pm_errcode pm_abort(pm_container* c);

void* pm_alloc(pm_container* c, size_t n);
/* Like pm_alloc, for a pointer-free block (pm::AllocKind::kData): values,
 * strings, raw bytes. Garbage collection (`pm gc`) keeps it while it is
 * reachable but follows nothing stored in it, and `pm check` does not scan
 * it for escaping pointers, so it must hold no pointer that keeps another
 * block alive. The kind is kept in the file. Freed with pm_free. */
void* pm_alloc_data(pm_container* c, size_t n);
pm_errcode pm_free(pm_container* c, void* p);
/* Shrinks the block starting at p in place to at least n bytes: a page run
   gives its pages past that back (allocated again after the commit);
   smaller blocks stay as they are. */
pm_errcode pm_shrink(pm_container* c, void* p, size_t n);
/* The block containing p: its start and usable bytes (either out pointer
   may be NULL). PM_ENOTFOUND when p is in no allocated block. */
pm_errcode pm_find_block(pm_container* c, const void* p, void** start, size_t* size);
/* Grows the heap to at least heap_bytes now (it also grows on demand). */
pm_errcode pm_reserve(pm_container* c, uint64_t heap_bytes);
/* Differs in every session that opens the container (a lock word kept in a
   persistent object remembers it: one of another generation is free).
   0 when c is NULL. */
uint64_t pm_generation(pm_container* c);
/* 1 if p lies in a data block, 0 in an object block, -1 in no block of c. */
int pm_is_data(pm_container* c, const void* p);

/* name NULL or "" = the root. NULL with pm_lasterror() PM_OK: no such root. */
void* pm_root(pm_container* c, const char* name);
pm_errcode pm_set_root(pm_container* c, const char* name, void* p);

void pm_will_write(pm_container* c, const void* p, size_t n);
void pm_begin_mutation(pm_container* c);
/* Without a pm_begin_mutation of c on this thread: nothing, and
   pm_lasterror() PM_EINVAL. */
void pm_end_mutation(pm_container* c);

/* --- the raw region (pm_options.raw_bytes at create; pm/raw_region.h):
   bytes outside the heap, written and persisted directly, not by commit,
   for logs. Offsets from 0 to pm_info.raw_bytes. --- */
pm_errcode pm_raw_write(pm_container* c, uint64_t off, const void* src, size_t n);
pm_errcode pm_raw_persist(pm_container* c, uint64_t off, size_t n);
pm_errcode pm_raw_read(pm_container* c, uint64_t off, void* dst, size_t n);

/* --- inspection and maintenance (pm::Container::info, check, collect) --- */
typedef struct pm_info {
  uint64_t file_bytes, heap_bytes, raw_bytes, max_bytes;
  uint64_t used_bytes, free_bytes, footprint_bytes;
  uint64_t blocks, dirty_pages;
  uint64_t base_address;
  uint64_t commits;
  int is_pmem;
  char tracker[16]; /* NUL-terminated: "uffd", "mprotect" or "hints" */
  int read_only;    /* opened with pm_options.read_only */
} pm_info;
pm_errcode pm_get_info(pm_container* c, pm_info* out);

typedef struct pm_check_result {
  uint64_t problems;        /* heap metadata inconsistencies */
  uint64_t escaping;        /* pointers out of the container in reachable objects */
  uint64_t blocks, used_bytes, reachable_blocks;
} pm_check_result;
/* Verifies the heap and looks for escaping pointers. PM_OK when both are
 * clean; PM_ECORRUPT otherwise, with the first findings in pm_errormsg();
 * PM_EBUSY between pm_begin_mutation and pm_end_mutation on this thread.
 * out may be NULL. */
pm_errcode pm_check(pm_container* c, pm_check_result* out);

typedef struct pm_collect_result {
  uint64_t live_blocks, live_bytes;
  uint64_t freed_blocks, freed_bytes;
} pm_collect_result;
/* Frees every block not reachable from the roots (durable at the next
 * pm_commit); with dry_run nonzero only counts them. out may be NULL.
 * PM_EINVAL for a key-value store's file (it frees its own blocks). */
pm_errcode pm_collect(pm_container* c, int dry_run, pm_collect_result* out);

/* The calling thread's last error message ("" if none). Valid until the next
 * failing call on this thread. */
const char* pm_errormsg(void);
/* The calling thread's last error code (PM_OK if none): what a function
 * that returned NULL (pm_open, pm_alloc, ...) failed with. */
pm_errcode pm_lasterror(void);

#ifdef __cplusplus
}
#endif

#endif /* PM_H_ */
