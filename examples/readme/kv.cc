// The kvstore snippet of README.md, as a program (tests/readme_snippets.sh
// checks that README shows the lines between the markers, verbatim).
#include <cstdio>
#include <string>

// README: begin
#include "kv/store.h"

int use_store(const std::string& path) {
  auto s = kv::Store::open(path);                 // created when missing
  if (!s.ok()) {                                  // e.g. its directory does not exist
    std::fprintf(stderr, "%s\n", s.status().to_string().c_str());
    return 1;
  }
  kv::Status st = (*s)->put("user/42", "Ada");   // durable when it returns
  std::string v;
  if (st.ok()) st = (*s)->get("user/42", &v);    // kNotFound when absent
  auto t = (*s)->begin();                         // atomic group of updates
  if (st.ok()) st = t->put("a", "1");
  if (st.ok()) st = t->remove("user/42");
  if (st.ok()) st = t->commit();
  // Keys in [begin, end) in byte order, at most 10 (scan(prefix, fn): a prefix)
  if (st.ok()) st = (*s)->scan("a", "user/", 10, [](std::string_view k, std::string_view v) {
    std::printf("%.*s=%.*s\n", int(k.size()), k.data(), int(v.size()), v.data());
    return true;                                  // false stops the scan
  });
  if (!st.ok()) std::fprintf(stderr, "%s\n", st.to_string().c_str());
  return st.ok() ? 0 : 1;
}
// README: end

int main(int argc, char** argv) { return use_store(argc > 1 ? argv[1] : "data/kv.pm"); }
