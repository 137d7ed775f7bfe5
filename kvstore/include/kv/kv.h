/* kv.h: the C API of kv::Store, the crash-safe key-value store.
 *
 * Mirrors kv::Store (kv/store.h): see there for the model and for when a put
 * is durable. Errors use libpm's codes (pm_errcode, pm.h): functions that can
 * fail return NULL or a nonzero code, and kv_errormsg() and kv_lasterror()
 * then return the message and the code of the calling thread's last
 * failure. Keys and values are byte strings with explicit lengths (they may
 * hold NUL bytes). Arguments: a NULL handle, a NULL pointer with a nonzero
 * length, or a key (prefix, seek position, end) over 65535 bytes gives
 * PM_EINVAL (NULL, or -1, from the functions that return those); no
 * argument makes a call throw or abort.
 * Thread-safe: a kv_store may be used from any number of threads; kv_close
 * must not run concurrently with other calls on the same store, its
 * transactions, cursors or iterators included (after it has returned they
 * are safe: see below). kv_close
 * aborts the store's open transactions and ends its iterators: calls on
 * them then give PM_EINVAL ("its store was closed"), and kv_commit,
 * kv_abort and kv_iter_close still free them. */
#ifndef KV_KV_H_
#define KV_KV_H_

#include <stddef.h>
#include <stdint.h>

#include "pm.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kv_store kv_store;

/* Same values as kv::Durability. */
typedef enum kv_durability {
  KV_DURABILITY_SYNC = 0,         /* a put is durable when it returns */
  KV_DURABILITY_ASYNC = 1,        /* durable after kv_sync or the background sync */
  KV_DURABILITY_SYNC_ON_PMEM = 2  /* SYNC on pmem, ASYNC on other file systems */
} kv_durability;

/* Options for kv_open; zero-initialise and set what you need. Zero fields
 * take the C++ defaults (kv::StoreOptions). The first six are stored when
 * the store is created and ignored when it is opened. */
typedef struct kv_options {
  int logs;
  uint64_t log_bytes;
  uint32_t max_key_bytes;
  uint32_t max_value_bytes;
  uint64_t initial_heap_bytes;
  uint64_t max_heap_bytes;
  int must_exist; /* nonzero: PM_ENOTFOUND instead of creating a missing store */
  kv_durability durability;
  int read_only; /* nonzero: open an existing store for reading only; updates
                    give PM_EROFS (kv::StoreOptions::read_only) */
} kv_options;

/* Opens the store in file `path`, creating it when missing (unless
 * opts->must_exist). opts may be NULL (all defaults). NULL on failure:
 * PM_ENOTFOUND, PM_EBUSY (open in another process), PM_ECORRUPT,
 * PM_EINVAL (options out of range, or not a store). */
kv_store* kv_open(const char* path, const kv_options* opts);
/* Stops the store's threads and closes it; s may be NULL. Acknowledged puts
 * are already logged: the next open replays them. Its open transactions are
 * aborted and its iterators ended (see the top of this file): free them
 * with kv_commit or kv_abort, and kv_iter_close. */
void kv_close(kv_store* s);

/* PM_EINVAL when the key is empty or over max_key_bytes, or the value is
 * over max_value_bytes. */
pm_errcode kv_put(kv_store* s, const char* key, size_t klen, const char* val, size_t vlen);
/* On success *val is a malloc'd copy of the value, followed by a NUL byte
 * that *vlen does not count; release it with kv_free. PM_ENOTFOUND when the
 * key is absent; *val and *vlen are left alone then. val and vlen may be
 * NULL: with both NULL, an existence check that copies nothing. */
pm_errcode kv_get(kv_store* s, const char* key, size_t klen, char** val, size_t* vlen);
/* PM_ENOTFOUND when the key is absent. */
pm_errcode kv_remove(kv_store* s, const char* key, size_t klen);

/* Makes every acknowledged update durable (KV_DURABILITY_ASYNC) and waits. */
pm_errcode kv_sync(kv_store* s);
/* Applies the logged updates to the backend and commits them. */
pm_errcode kv_checkpoint(kv_store* s);

/* --- transactions: puts and removes that become durable together (one log
 * record: a crash keeps all of them or none). Reads do not see a
 * transaction's pending writes. One thread at a time per transaction. */
typedef struct kv_txn kv_txn;
/* NULL when s is NULL (PM_EINVAL), or out of memory. */
kv_txn* kv_begin(kv_store* s);
pm_errcode kv_txn_put(kv_txn* t, const char* key, size_t klen, const char* val, size_t vlen);
pm_errcode kv_txn_remove(kv_txn* t, const char* key, size_t klen);
/* Applies every operation atomically (removes of absent keys are no-ops) and
 * frees t, whatever the outcome. PM_EINVAL: a key or value out of the limits,
 * or the group does not fit in one log record; nothing is applied then. */
pm_errcode kv_commit(kv_txn* t);
/* Discards the pending operations and frees t; t may be NULL. */
void kv_abort(kv_txn* t);

/* --- cursors: every key with a prefix, in byte order (memcmp, shorter
 * first). The matching pairs are read when the cursor opens: each key
 * present throughout kv_cursor_open is returned exactly once, and later
 * updates do not show. Memory: the matching keys and values (for large
 * ranges, use an iterator below). */
typedef struct kv_cursor kv_cursor;
/* prefix may be NULL with plen 0: every key. NULL on failure. */
kv_cursor* kv_cursor_open(kv_store* s, const char* prefix, size_t plen);
/* 1 and the next pair (pointers valid until the next call on c), or 0 at
 * the end (and for c NULL, the cursor of a failed open). NULL output
 * pointers are skipped. */
int kv_cursor_next(kv_cursor* c, const char** key, size_t* klen, const char** val, size_t* vlen);
/* c may be NULL. */
void kv_cursor_close(kv_cursor* c);

/* --- iterators: keys in byte order from a seek position up to an end,
 * read in batches as they go (memory: one batch), at a snapshot as
 * kv::Store::scan reads: the store as of the seek (opening, and each
 * kv_iter_seek), each key once, later updates not seen. While an iterator
 * is open, updates keep a DRAM copy of what they replace: close iterators
 * when done. Not thread-safe (one thread at a time per iterator). */
typedef struct kv_iter kv_iter;
/* Keys below end (NULL with elen 0: no end). NULL on failure. Positioned at
 * the first key: kv_iter_seek repositions. */
kv_iter* kv_iter_open(kv_store* s, const char* end, size_t elen);
/* Positions at the first key >= key (NULL with klen 0: the first key). On
 * a failure kv_iter_next fails too, until a seek succeeds. */
pm_errcode kv_iter_seek(kv_iter* it, const char* key, size_t klen);
/* 1 and the pair at the position, then moves past it; 0 at the end; -1 when
 * a read failed (after every key before the one that failed) or it is NULL
 * (kv_errormsg). Pointers valid until the next call on it; NULL output
 * pointers are skipped. */
int kv_iter_next(kv_iter* it, const char** key, size_t* klen, const char** val, size_t* vlen);
/* it may be NULL. */
void kv_iter_close(kv_iter* it);

/* --- statistics: a subset of kv::StoreStats (kv/store.h has the meaning of
 * each field). */
typedef struct kv_stats {
  uint64_t keys;
  uint64_t puts, removes, gets, misses;
  uint64_t frontend_items, frontend_bytes;
  uint64_t backend_keys;
  uint64_t container_used_bytes, container_file_bytes;
  uint64_t log_bytes, log_used_bytes;
  uint64_t epochs;
  uint64_t recovered_records;
  int is_pmem;
  kv_durability durability; /* in force */
} kv_stats;
pm_errcode kv_get_stats(kv_store* s, kv_stats* out);

/* Frees a value returned by kv_get; NULL is allowed. */
void kv_free(void* p);

/* The calling thread's last kv_* error message ("" if none). Valid until the
 * next failing kv_* call on this thread. */
const char* kv_errormsg(void);
/* The calling thread's last kv_* error code (PM_OK if none): what a
 * function that returned NULL (kv_open, kv_begin, ...) failed with. */
pm_errcode kv_lasterror(void);

#ifdef __cplusplus
}
#endif

#endif /* KV_KV_H_ */
