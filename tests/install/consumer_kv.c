/* A C program that uses only the store's API (so an as-needed linker keeps
 * no reference of its own to libpm, which libpmkv must then find by
 * itself), built against the installed libpm (tests/install/test_install.sh). */
#include <kv/kv.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fail(const char* what) {
  fprintf(stderr, "consumer_kv.c: %s: %s\n", what, kv_errormsg());
  return 1;
}

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  kv_options o;
  memset(&o, 0, sizeof o);
  o.must_exist = 1;
  if (kv_open(argv[1], &o) != NULL || kv_lasterror() != PM_ENOTFOUND) return fail("must_exist");
  kv_store* s = kv_open(argv[1], NULL);
  if (s == NULL) return fail("kv_open");
  if (kv_put(s, "k", 1, "v", 1) != PM_OK) return fail("kv_put");
  kv_close(s);
  s = kv_open(argv[1], NULL);
  if (s == NULL) return fail("kv_open again");
  char* v = NULL;
  size_t n = 0;
  if (kv_get(s, "k", 1, &v, &n) != PM_OK || n != 1 || v[0] != 'v') return fail("kv_get");
  kv_free(v);
  kv_close(s);
  puts("consumer_kv.c: a put survives a reopen");
  return 0;
}
