/* Compiled as C: the header must stay valid C. */
#include <stdio.h>
#include <string.h>

#include "pm.h"

struct point {
  struct point* next;
  long x;
};

/* Returns 0 on success, or a step number. */
int c_api_roundtrip(const char* path) {
  pm_options o;
  memset(&o, 0, sizeof o);
  o.initial_size = 4u << 20;
  o.max_size = 1ull << 30;
  pm_container* c = pm_create(path, &o);
  if (!c) return 1;
  struct point* p = pm_alloc(c, sizeof *p);
  if (!p) return 2;
  pm_will_write(c, p, sizeof *p);
  p->next = NULL;
  p->x = 42;
  if (pm_set_root(c, NULL, p) != PM_OK) return 3;
  if (pm_commit(c) != PM_OK) return 4;
  pm_close(c);
  c = pm_open(path, NULL);
  if (!c) return 5;
  p = pm_root(c, NULL);
  if (!p || p->x != 42) return 6;
  if (pm_free(c, (char*)p + 1) != PM_EINVAL || strlen(pm_errormsg()) == 0) return 7;
  pm_close(c);
  if (pm_open("/nonexistent/dir/x.pm", NULL) != NULL) return 8;
  if (strstr(pm_errormsg(), "no such container") == NULL) return 9;
  if (pm_lasterror() != PM_ENOTFOUND) return 10;
  return 0;
}

/* Data blocks: the kind survives commit and reopen; pm_is_data tells. */
int c_api_data_blocks(const char* path) {
  pm_options o;
  memset(&o, 0, sizeof o);
  o.initial_size = 4u << 20;
  o.max_size = 1ull << 30;
  pm_container* c = pm_create(path, &o);
  if (!c) return 1;
  struct point* p = pm_alloc(c, sizeof *p);
  char* text = pm_alloc_data(c, 100);
  char* big = pm_alloc_data(c, 100000);
  if (!p || !text || !big) return 2;
  pm_will_write(c, p, sizeof *p);
  p->next = (struct point*)text;
  p->x = 7;
  pm_will_write(c, text, 100);
  strcpy(text, "abcdeU");
  if (pm_is_data(c, text) != 1 || pm_is_data(c, text + 99) != 1) return 3;
  if (pm_is_data(c, big) != 1) return 3;
  if (pm_is_data(c, p) != 0) return 4;
  if (pm_free(c, big) != PM_OK) return 5;
  if (pm_is_data(c, big) != -1 || strlen(pm_errormsg()) == 0) return 6;
  if (pm_set_root(c, NULL, p) != PM_OK || pm_commit(c) != PM_OK) return 7;
  pm_close(c);
  c = pm_open(path, NULL);
  if (!c) return 8;
  p = pm_root(c, NULL);
  if (!p || pm_is_data(c, p) != 0 || pm_is_data(c, p->next) != 1) return 9;
  if (strcmp((const char*)p->next, "abcdeU") != 0) return 10;
  if (pm_free(c, p->next) != PM_OK) return 11;
  pm_close(c);
  return 0;
}

/* Info, check, collect and the options added with them. Returns 0 on
 * success, or a step number. */
int c_api_inspect(const char* path) {
  pm_options o;
  memset(&o, 0, sizeof o);
  o.initial_size = 4u << 20;
  o.tracker = "hints";
  o.check_escapes_at_commit = 1;
  pm_container* c = pm_create(path, &o);
  if (!c) return 1;
  struct point* kept = pm_alloc(c, sizeof *kept);
  struct point* lost = pm_alloc(c, sizeof *lost);
  if (!kept || !lost) return 2;
  pm_will_write(c, kept, sizeof *kept);
  kept->next = NULL;
  kept->x = 1;
  if (pm_set_root(c, NULL, kept) != PM_OK || pm_commit(c) != PM_OK) return 3;

  pm_info info;
  if (pm_get_info(c, &info) != PM_OK) return 4;
  if (info.blocks < 2 || info.heap_bytes == 0 || strcmp(info.tracker, "hints") != 0) return 5;
  pm_check_result cr;
  if (pm_check(c, &cr) != PM_OK || cr.problems != 0 || cr.escaping != 0) return 6;

  pm_collect_result gc;
  if (pm_collect(c, 1, &gc) != PM_OK || gc.freed_blocks != 1) return 7;
  if (pm_collect(c, 0, &gc) != PM_OK || gc.freed_blocks != 1 || pm_commit(c) != PM_OK) return 8;
  if (pm_collect(c, 1, &gc) != PM_OK || gc.freed_blocks != 0) return 9;

  /* A pointer to this stack frame, stored in a reachable object. */
  long local = 7;
  pm_will_write(c, kept, sizeof *kept);
  kept->next = (struct point*)&local;
  if (pm_check(c, &cr) != PM_ECORRUPT || cr.escaping != 1) return 10;
  if (strstr(pm_errormsg(), "escaping") == NULL) return 11;
  if (pm_commit(c) != PM_EINVAL) return 12; /* check_escapes_at_commit */
  if (pm_abort(c) != PM_OK) return 13;
  pm_close(c);
  return 0;
}

/* NULL handles and outputs are PM_EINVAL with a message, never a crash. */
int c_api_misuse(const char* path) {
  pm_options o;
  memset(&o, 0, sizeof o);
  if (pm_create(NULL, NULL) != NULL || strstr(pm_errormsg(), "path is NULL") == NULL) return 1;
  o.tracker = "nonsense";
  if (pm_create(path, &o) != NULL || strstr(pm_errormsg(), "nonsense") == NULL) return 2;
  o.tracker = NULL;
  o.initial_size = 4u << 20;
  pm_container* c = pm_create(path, &o);
  if (!c) return 3;
  if (pm_commit(NULL) != PM_EINVAL || pm_abort(NULL) != PM_EINVAL) return 4;
  if (strstr(pm_errormsg(), "container is NULL") == NULL) return 5;
  if (pm_alloc(NULL, 8) != NULL || pm_alloc_data(NULL, 8) != NULL) return 6;
  if (pm_alloc(c, (size_t)-1) != NULL || strlen(pm_errormsg()) == 0) return 7;
  if (pm_free(NULL, NULL) != PM_EINVAL || pm_free(c, NULL) != PM_OK) return 8;
  if (pm_is_data(NULL, c) != -1 || pm_root(NULL, NULL) != NULL) return 9;
  if (pm_set_root(NULL, NULL, NULL) != PM_EINVAL || pm_remove(NULL) != PM_EINVAL) return 10;
  pm_will_write(NULL, c, 8);
  pm_begin_mutation(NULL);
  pm_end_mutation(NULL);
  long* x = pm_alloc(c, sizeof *x);
  if (!x) return 11;
  pm_will_write(c, x, (size_t)-1); /* cut at the end of the address space */
  *x = 5;
  if (pm_set_root(c, NULL, x) != PM_OK || pm_commit(c) != PM_OK) return 12;
  pm_info info;
  if (pm_get_info(c, NULL) != PM_EINVAL || pm_get_info(NULL, &info) != PM_EINVAL) return 13;
  if (pm_check(NULL, NULL) != PM_EINVAL || pm_collect(NULL, 1, NULL) != PM_EINVAL) return 14;
  if (pm_check(c, NULL) != PM_OK) return 15;
  pm_close(c);
  pm_close(NULL);
  c = pm_open(path, NULL);
  if (!c) return 16;
  x = pm_root(c, NULL);
  if (!x || *x != 5) return 17;
  /* An end without a begin is an error, and commits still work after it. */
  pm_end_mutation(c);
  if (pm_lasterror() != PM_EINVAL || strstr(pm_errormsg(), "pm_begin_mutation") == NULL) return 18;
  if (pm_commit(c) != PM_OK) return 19;
  /* No such root: NULL, and no error (not the last failure's code). */
  if (pm_free(c, (void*)8) != PM_EINVAL) return 20;
  if (pm_root(c, "nosuch") != NULL || pm_lasterror() != PM_OK) return 21;
  /* A root that is there leaves the last failure as it was. */
  if (pm_free(c, (void*)8) != PM_EINVAL || pm_root(c, NULL) == NULL) return 24;
  if (pm_lasterror() != PM_EINVAL || pm_errormsg()[0] == '\0') return 25;
  /* pm_check inside a mutation is refused, not a wait for itself. */
  pm_begin_mutation(c);
  if (pm_check(c, NULL) != PM_EBUSY) return 26;
  pm_end_mutation(c);
  /* With all 32 named roots in use, clearing one that is not there is a
     no-op, not "no room". */
  for (int i = 0; i < 32; i++) {
    char name[8];
    snprintf(name, sizeof name, "r%d", i);
    if (pm_set_root(c, name, x) != PM_OK) return 27;
  }
  if (pm_set_root(c, "absent", NULL) != PM_OK || pm_set_root(c, "absent", x) != PM_ENOSPC) {
    return 28;
  }
  if (pm_set_root(c, "r7", NULL) != PM_OK || pm_root(c, "r7") != NULL) return 29;
  /* A container closed amid a mutation leaves nothing held for the next. */
  for (int i = 0; i < 20; i++) {
    pm_begin_mutation(c);
    pm_close(c);
    c = pm_open(path, NULL);
    if (!c) return 22;
    if (pm_commit(c) != PM_OK) return 23;
  }
  pm_close(c);
  return 0;
}

/* Blocks (find, shrink), growth, the generation and the raw region from C. */
int c_api_blocks_and_raw(const char* path) {
  pm_options o;
  memset(&o, 0, sizeof o);
  o.initial_size = 4u << 20;
  o.max_size = 1ull << 30;
  o.raw_bytes = 1u << 20;
  pm_container* c = pm_create(path, &o);
  if (!c) return 1;
  char* run = pm_alloc_data(c, 256u << 10);
  if (!run) return 2;
  void* start = NULL;
  size_t size = 0;
  if (pm_find_block(c, run + 100, &start, &size) != PM_OK || start != run || size < (256u << 10)) {
    return 3;
  }
  int local = 0;
  if (pm_find_block(c, &local, NULL, NULL) == PM_OK) return 4;
  if (pm_shrink(c, run, 4096) != PM_OK || pm_commit(c) != PM_OK) return 5;
  if (pm_find_block(c, run, NULL, &size) != PM_OK || size >= (256u << 10)) return 6;
  if (pm_reserve(c, 64u << 20) != PM_OK) return 7;
  pm_info info;
  if (pm_get_info(c, &info) != PM_OK || info.heap_bytes < (64u << 20)) return 8;
  if (pm_raw_write(c, 10, "hello", 5) != PM_OK || pm_raw_persist(c, 10, 5) != PM_OK) return 9;
  if (pm_raw_write(c, (1u << 20) - 2, "hello", 5) == PM_OK) return 10; /* past the end */
  const uint64_t generation = pm_generation(c);
  if (generation == 0 || pm_generation(NULL) != 0) return 11;
  pm_close(c);
  c = pm_open(path, NULL);
  if (!c) return 12;
  char back[6] = {0};
  if (pm_raw_read(c, 10, back, 5) != PM_OK || strcmp(back, "hello") != 0) return 13;
  if (pm_raw_read(c, 0, NULL, 5) != PM_EINVAL) return 14;
  if (pm_generation(c) == generation) return 15;
  pm_close(c);
  /* Read-only: a raw write is refused, not dropped in a private copy. */
  o.read_only = 1;
  c = pm_open(path, &o);
  if (!c) return 16;
  if (pm_raw_write(c, 10, "HELLO", 5) != PM_EROFS) return 17;
  if (pm_raw_read(c, 10, back, 5) != PM_OK || strcmp(back, "hello") != 0) return 18;
  pm_close(c);
  return 0;
}
