/* A C program built outside the tree against the installed libpm, through
 * pkg-config (tests/install/test_install.sh): a container commit and a store
 * put survive a reopen. */
#include <kv/kv.h>
#include <pm.h>
#include <stdio.h>
#include <string.h>

static int fail(const char* what, const char* msg) {
  fprintf(stderr, "consumer.c: %s: %s\n", what, msg);
  return 1;
}

int main(int argc, char** argv) {
  if (argc != 3) return fail("usage", "consumer CONTAINER STORE");
  pm_options o;
  memset(&o, 0, sizeof o);
  o.create_if_missing = 1;
  o.tracker = "hints";  /* every write announced: no fault handler needed */
  pm_container* c = pm_open(argv[1], &o);
  if (c == NULL) return fail("pm_open", pm_errormsg());
  char* s = pm_alloc(c, 16);
  if (s == NULL) return fail("pm_alloc", pm_errormsg());
  pm_will_write(c, s, 16);
  strcpy(s, "hello");
  if (pm_set_root(c, NULL, s) != PM_OK || pm_commit(c) != PM_OK) return fail("commit", pm_errormsg());
  pm_close(c);
  c = pm_open(argv[1], &o);
  if (c == NULL) return fail("pm_open again", pm_errormsg());
  const char* back = pm_root(c, NULL);
  if (back == NULL || strcmp(back, "hello") != 0) return fail("root", "lost after reopen");
  pm_close(c);

  kv_store* st = kv_open(argv[2], NULL);
  if (st == NULL) return fail("kv_open", kv_errormsg());
  if (kv_put(st, "k", 1, "v1", 2) != PM_OK) return fail("kv_put", kv_errormsg());
  kv_close(st);
  st = kv_open(argv[2], NULL);
  if (st == NULL) return fail("kv_open again", kv_errormsg());
  char* v = NULL;
  size_t n = 0;
  if (kv_get(st, "k", 1, &v, &n) != PM_OK || n != 2 || memcmp(v, "v1", 2) != 0) {
    return fail("kv_get", "lost after reopen");
  }
  kv_free(v);
  kv_close(st);
  printf("c consumer: ok\n");
  return 0;
}
