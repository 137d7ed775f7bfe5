// A C++ program built outside the tree against the installed libpm, through
// find_package(libpm CONFIG) (tests/install/test_install.sh).
#include <cstdio>
#include <cstring>
#include <string>

#include "kv/store.h"
#include "pm/container.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: consumer CONTAINER STORE\n");
    return 2;
  }
  auto die = [](const pm::Status& s) {
    std::fprintf(stderr, "consumer.cc: %s\n", s.to_string().c_str());
    return 1;
  };
  {
    pm::Options o;
    o.create_if_missing = true;
    auto c = pm::Container::open(argv[1], o);
    if (!c.ok()) return die(c.status());
    auto p = (*c)->alloc(sizeof(uint64_t));
    if (!p.ok()) return die(p.status());
    *static_cast<uint64_t*>(*p) = 42;
    if (auto s = (*c)->set_root(*p); !s.ok()) return die(s);
    if (auto s = (*c)->commit(); !s.ok()) return die(s);
  }
  {
    auto c = pm::Container::open(argv[1], pm::Options());
    if (!c.ok()) return die(c.status());
    if (*static_cast<uint64_t*>((*c)->root()) != 42) return die(pm::Status::corruption("root lost"));
  }
  {
    kv::StoreOptions so;
    so.create_if_missing = true;
    auto st = kv::Store::open(argv[2], so);
    if (!st.ok()) return die(st.status());
    if (auto s = (*st)->put("key", "value"); !s.ok()) return die(s);
  }
  auto st = kv::Store::open(argv[2], kv::StoreOptions());
  if (!st.ok()) return die(st.status());
  std::string v;
  if (auto s = (*st)->get("key", &v); !s.ok() || v != "value") return die(pm::Status::corruption("lost"));
  std::printf("c++ consumer: ok\n");
  return 0;
}
