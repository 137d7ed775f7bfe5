/* Compiled as C: the header must stay valid C. */
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
  return 0;
}
