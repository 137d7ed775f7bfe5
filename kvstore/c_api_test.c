/* Compiled as C: the header must stay valid C. */
#include <stdio.h>
#include <string.h>

#include "kv/kv.h"
#include "pm.h"

/* Returns 0 on success, or a step number. */
int kv_c_api_roundtrip(const char* path) {
  kv_options o;
  memset(&o, 0, sizeof o);
  o.logs = 2;
  o.log_bytes = 256u << 10;
  o.max_key_bytes = 16;
  o.max_value_bytes = 4096;
  o.initial_heap_bytes = 4u << 20;
  kv_store* s = kv_open(path, &o);
  if (!s) return 1;
  static const char key[] = {'k', '\0', 'y'};
  static const char val[] = {'\0', 'v', '\xff', '\n'};
  if (kv_put(s, key, sizeof key, val, sizeof val) != PM_OK) return 2;
  if (kv_put(s, "empty", 5, NULL, 0) != PM_OK) return 3;
  if (kv_put(s, "gone", 4, "x", 1) != PM_OK) return 4;
  if (kv_remove(s, "gone", 4) != PM_OK) return 5;
  if (kv_remove(s, "gone", 4) != PM_ENOTFOUND || strlen(kv_errormsg()) == 0) return 6;
  if (kv_put(s, "a key longer than sixteen", 25, "x", 1) != PM_EINVAL) return 7;
  if (strstr(kv_errormsg(), "over the limit") == NULL) return 8;
  if (kv_sync(s) != PM_OK || kv_checkpoint(s) != PM_OK) return 9;
  kv_close(s);

  s = kv_open(path, NULL);
  if (!s) return 10;
  char* v = NULL;
  size_t n = 0;
  if (kv_get(s, key, sizeof key, &v, &n) != PM_OK) return 11;
  if (n != sizeof val || memcmp(v, val, n) != 0 || v[n] != '\0') return 12;
  kv_free(v);
  v = NULL;
  if (kv_get(s, "empty", 5, &v, &n) != PM_OK || n != 0 || v == NULL) return 13;
  kv_free(v);
  v = NULL;
  n = 7;
  if (kv_get(s, "gone", 4, &v, &n) != PM_ENOTFOUND || v != NULL || n != 7) return 14;
  kv_close(s);

  /* Read-only: reads work, updates say PM_EROFS. */
  o.read_only = 1;
  s = kv_open(path, &o);
  if (!s) return 17;
  v = NULL;
  if (kv_get(s, key, sizeof key, &v, &n) != PM_OK || n != sizeof val) return 18;
  kv_free(v);
  if (kv_put(s, "new", 3, "x", 1) != PM_EROFS || strstr(kv_errormsg(), "read-only") == NULL) {
    return 19;
  }
  kv_close(s);
  o.read_only = 0;

  o.must_exist = 1;
  if (kv_open("/nonexistent/dir/kv.pm", &o) != NULL) return 20;
  if (strstr(kv_errormsg(), "no such store") == NULL) return 21;
  if (kv_lasterror() != PM_ENOTFOUND) return 22;
  return 0;
}

/* Transactions, cursors, iterators and statistics. Returns 0 on success, or a step. */
int kv_c_api_txn_cursor_stats(const char* path) {
  kv_store* s = kv_open(path, NULL);
  if (!s) return 1;
  kv_txn* t = kv_begin(s);
  if (!t) return 2;
  if (kv_txn_put(t, "b/2", 3, "two", 3) != PM_OK) return 3;
  if (kv_txn_put(t, "b/1", 3, "one", 3) != PM_OK) return 4;
  if (kv_txn_put(t, "a", 1, "x", 1) != PM_OK) return 5;
  if (kv_txn_remove(t, "nothing", 7) != PM_OK) return 6;
  if (kv_commit(t) != PM_OK) return 7;
  /* An aborted group leaves nothing. */
  t = kv_begin(s);
  if (kv_txn_put(t, "b/3", 3, "three", 5) != PM_OK) return 8;
  kv_abort(t);
  /* A group that cannot apply applies nothing. */
  t = kv_begin(s);
  if (kv_txn_put(t, "b/4", 3, "four", 4) != PM_OK) return 9;
  if (kv_txn_put(t, "", 0, "empty key", 9) != PM_OK) return 10;
  if (kv_commit(t) != PM_EINVAL || strlen(kv_errormsg()) == 0) return 11;
  char* v = NULL;
  size_t n = 0;
  if (kv_get(s, "b/4", 3, &v, &n) != PM_ENOTFOUND) return 12;

  kv_cursor* c = kv_cursor_open(s, "b/", 2);
  if (!c) return 13;
  const char *k, *val;
  size_t kl, vl;
  if (kv_cursor_next(c, &k, &kl, &val, &vl) != 1 || kl != 3 || memcmp(k, "b/1", 3) != 0 ||
      vl != 3 || memcmp(val, "one", 3) != 0) {
    return 14;
  }
  if (kv_cursor_next(c, &k, &kl, &val, &vl) != 1 || memcmp(k, "b/2", 3) != 0) return 15;
  if (kv_cursor_next(c, &k, &kl, &val, &vl) != 0) return 16;
  kv_cursor_close(c);
  c = kv_cursor_open(s, NULL, 0);
  int all = 0;
  while (kv_cursor_next(c, &k, &kl, &val, &vl)) all++;
  kv_cursor_close(c);
  if (all != 3) return 17;

  /* An iterator: from a seek position, below an end, streaming. */
  kv_iter* it = kv_iter_open(s, "b/2", 3);
  if (!it) return 20;
  if (kv_iter_next(it, &k, &kl, &val, &vl) != 1 || kl != 1 || memcmp(k, "a", 1) != 0) return 21;
  if (kv_iter_next(it, &k, &kl, &val, &vl) != 1 || memcmp(k, "b/1", 3) != 0) return 22;
  if (kv_iter_next(it, &k, &kl, &val, &vl) != 0) return 23; /* b/2 is the end */
  if (kv_iter_seek(it, "b", 1) != PM_OK) return 24;
  if (kv_iter_next(it, &k, &kl, &val, &vl) != 1 || memcmp(k, "b/1", 3) != 0 || vl != 3 ||
      memcmp(val, "one", 3) != 0) {
    return 25;
  }
  kv_iter_close(it);
  it = kv_iter_open(s, NULL, 0);
  all = 0;
  while (kv_iter_next(it, &k, &kl, &val, &vl) == 1) all++;
  kv_iter_close(it);
  if (all != 3) return 26;

  /* An iterator reads at the snapshot of its seek: a remove and a put made
   * after it, past its first batch (128 keys), do not show; the next seek
   * sees them. */
  char zk[16];
  for (int i = 0; i < 200; i++) {
    snprintf(zk, sizeof zk, "z%03d", i);
    if (kv_put(s, zk, 4, "v", 1) != PM_OK) return 40;
  }
  it = kv_iter_open(s, NULL, 0);
  if (kv_remove(s, "z150", 4) != PM_OK || kv_put(s, "z150x", 5, "v", 1) != PM_OK) return 41;
  int z150 = 0, z150x = 0;
  all = 0;
  while (kv_iter_next(it, &k, &kl, &val, &vl) == 1) {
    all++;
    z150 += kl == 4 && memcmp(k, "z150", 4) == 0;
    z150x += kl == 5 && memcmp(k, "z150x", 5) == 0;
  }
  if (all != 203 || z150 != 1 || z150x != 0) return 42;
  if (kv_iter_seek(it, "z150", 4) != PM_OK) return 43;
  if (kv_iter_next(it, &k, &kl, &val, &vl) != 1 || kl != 5 || memcmp(k, "z150x", 5) != 0) return 44;
  kv_iter_close(it);
  for (int i = 0; i < 200; i++) {
    snprintf(zk, sizeof zk, "z%03d", i);
    if (i != 150 && kv_remove(s, zk, 4) != PM_OK) return 45;
  }
  if (kv_remove(s, "z150x", 5) != PM_OK) return 46;

  kv_stats st;
  if (kv_get_stats(s, &st) != PM_OK) return 18;
  if (st.keys != 3 || st.puts < 3 || st.log_bytes == 0 || st.container_file_bytes == 0) return 19;
  kv_close(s);
  return 0;
}

/* Misuse a C caller can make: NULL handles, NULL pointers with lengths,
 * lengths no string holds. Each is PM_EINVAL with a message (or NULL, -1,
 * 0), nothing is stored, and the process goes on. Returns 0, or a step. */
int kv_c_api_misuse(const char* path) {
  const size_t huge = (size_t)-1;
  if (kv_open(NULL, NULL) != NULL || kv_errormsg()[0] == '\0') return 1;
  kv_store* s = kv_open(path, NULL);
  if (!s) return 2;
  if (kv_put(NULL, "k", 1, "v", 1) != PM_EINVAL) return 3;
  if (kv_put(s, NULL, 5, "v", 1) != PM_EINVAL) return 4;
  if (kv_put(s, "k", 1, NULL, 100) != PM_EINVAL) return 5;
  if (strstr(kv_errormsg(), "value is NULL") == NULL) return 6;
  if (kv_get(s, "k", 1, NULL, NULL) != PM_ENOTFOUND) return 7; /* nothing was stored */
  if (kv_put(s, "k", 1, "v", 1) != PM_OK) return 8;
  if (kv_get(s, "k", 1, NULL, NULL) != PM_OK) return 9; /* an existence check */
  size_t n = 0;
  if (kv_get(s, "k", 1, NULL, &n) != PM_OK || n != 1) return 10;
  if (kv_get(s, "k", huge, NULL, NULL) != PM_EINVAL) return 11;
  if (kv_remove(NULL, "k", 1) != PM_EINVAL || kv_sync(NULL) != PM_EINVAL) return 12;
  if (kv_get_stats(s, NULL) != PM_EINVAL || kv_get_stats(NULL, NULL) != PM_EINVAL) return 13;

  if (kv_begin(NULL) != NULL || kv_commit(NULL) != PM_EINVAL) return 14;
  kv_txn* t = kv_begin(s);
  if (!t) return 15;
  if (kv_txn_put(t, "k", 1, "v", huge) != PM_EINVAL) return 16; /* no string holds it */
  if (kv_txn_put(NULL, "k", 1, "v", 1) != PM_EINVAL) return 17;
  if (kv_txn_remove(t, NULL, 3) != PM_EINVAL) return 18;
  if (kv_txn_put(t, "t", 1, "x", 1) != PM_OK) return 19;
  if (kv_commit(t) != PM_OK) return 20;

  if (kv_cursor_open(s, NULL, 5) != NULL || kv_cursor_open(NULL, "", 0) != NULL) return 21;
  if (kv_cursor_next(NULL, NULL, NULL, NULL, NULL) != 0) return 22;
  kv_cursor* c = kv_cursor_open(s, "", 0);
  if (!c) return 23;
  int pairs = 0;
  while (kv_cursor_next(c, NULL, NULL, NULL, NULL) == 1) pairs++;
  kv_cursor_close(c);
  if (pairs != 2) return 24; /* "k" and "t" */

  if (kv_iter_open(s, NULL, 1) != NULL || kv_iter_open(NULL, NULL, 0) != NULL) return 25;
  const char *k, *v;
  size_t kl, vl;
  if (kv_iter_next(NULL, &k, &kl, &v, &vl) != -1) return 26;
  kv_iter* it = kv_iter_open(s, NULL, 0);
  if (!it) return 27;
  if (kv_iter_seek(it, "a", huge) != PM_EINVAL || kv_iter_seek(it, NULL, 2) != PM_EINVAL) return 28;
  /* A failed seek leaves no position: next fails (it went on from the
   * first key) until a seek succeeds. */
  if (kv_iter_next(it, &k, &kl, &v, &vl) != -1 || !strstr(kv_errormsg(), "seek again")) return 28;
  if (kv_iter_seek(NULL, "a", 1) != PM_EINVAL) return 29;
  if (kv_iter_seek(it, "t", 1) != PM_OK) return 30;
  if (kv_iter_next(it, NULL, &kl, NULL, NULL) != 1 || kl != 1) return 31;
  if (kv_iter_next(it, &k, &kl, &v, &vl) != 0) return 32;
  kv_iter_close(it);

  /* Closing the store with a transaction and iterators open: they end
   * (the transaction aborted), and calls on them are errors until freed. */
  t = kv_begin(s);
  kv_txn* t2 = kv_begin(s);
  it = kv_iter_open(s, NULL, 0);
  kv_iter* it2 = kv_iter_open(s, NULL, 0);
  if (!t || !t2 || !it || !it2) return 33;
  if (kv_txn_put(t, "lost", 4, "x", 1) != PM_OK) return 34;
  kv_close(s);
  if (kv_txn_put(t, "k", 1, "v", 1) != PM_EINVAL || strstr(kv_errormsg(), "closed") == NULL) {
    return 35;
  }
  if (kv_commit(t) != PM_EINVAL) return 36;
  kv_abort(t2);
  if (kv_iter_next(it, &k, &kl, &v, &vl) != -1 || kv_iter_seek(it, "a", 1) != PM_EINVAL) return 37;
  kv_iter_close(it);
  kv_iter_close(it2);
  s = kv_open(path, NULL);
  if (!s) return 38;
  if (kv_get(s, "lost", 4, NULL, NULL) != PM_ENOTFOUND) return 39; /* aborted */
  kv_close(s);
  /* The limits fixed at create are ignored at an open, as kv.h says; a
     durability outside the enum is an error. */
  kv_options o;
  memset(&o, 0, sizeof o);
  o.max_key_bytes = 70000;
  o.logs = -5;
  s = kv_open(path, &o);
  if (!s) return 40;
  kv_close(s);
  int bad = 7;
  memcpy(&o.durability, &bad, sizeof bad);
  if (kv_open(path, &o) != NULL || kv_lasterror() != PM_EINVAL) return 41;
  if (strstr(kv_errormsg(), "durability 7") == NULL) return 42;
  /* A directory where a store goes is the caller's mistake, not an I/O error. */
  if (kv_open("/", NULL) != NULL || kv_lasterror() != PM_EINVAL) return 47;
  /* A store's file opened as a plain container: collecting is refused (it
     freed live entries of the store, a user trial), and the store reads on. */
  s = kv_open(path, NULL);
  if (!s || kv_put(s, "kept", 4, "v", 1) != PM_OK) return 43;
  kv_close(s);
  pm_options po;
  memset(&po, 0, sizeof po);
  pm_container* pc = pm_open(path, &po);
  if (!pc) return 44;
  pm_collect_result r;
  if (pm_collect(pc, 0, &r) != PM_EINVAL || strstr(pm_errormsg(), "key-value store") == NULL) {
    return 45;
  }
  pm_close(pc);
  s = kv_open(path, NULL);
  if (!s || kv_get(s, "kept", 4, NULL, NULL) != PM_OK) return 46;
  kv_close(s);
  return 0;
}
