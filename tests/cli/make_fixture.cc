// Writes a container for the CLI tests: a root object that holds a pointer
// into this process's DRAM heap (an escaping pointer), plus three blocks
// nothing points to (garbage for pm gc).
#include <cstdio>
#include <cstdlib>

#include "pm/container.h"

struct Root {
  void* dram;  // the porting bug pm check must name
  Root* self;  // a pointer inside the container: fine
};

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  auto c = pm::Container::create(argv[1]);
  if (!c.ok()) return std::fprintf(stderr, "%s\n", c.status().to_string().c_str()), 1;
  Root* r = *(*c)->make<Root>(Root{std::malloc(64), nullptr});
  r->self = r;
  for (size_t n : {100, 5000, 200000}) (void)(*c)->alloc(n);
  void* dram = r->dram;
  bool ok = (*c)->set_root(r).ok() && (*c)->commit().ok();
  std::free(dram);  // the committed value still points out of the container
  return ok ? 0 : 1;
}
