// boost_map: a word counter whose counts survive across runs. The counts are
// a boost::container::map<string, int> that lives in a container, found by
// name with pm::find_or_construct; the map is changed with its ordinary
// member functions and one commit() makes the run's counts durable.
//
//   boost_map data/words.pm to be or not to be   # counts the words, prints all counts
//   boost_map data/words.pm                        # prints the counts
//
// Exit codes: 0 done, 1 failed, 2 usage.
#include <boost/container/map.hpp>
#include <boost/container/string.hpp>
#include <cstdio>
#include <functional>
#include <new>
#include <string_view>
#include <utility>

#include "pm/allocator.h"
#include "pm/container.h"
#include "pm/named.h"

namespace {

using String = boost::container::basic_string<char, std::char_traits<char>, pm::allocator<char>>;
// std::less<> lets find() take a std::string_view without building a String.
using Counts =
    boost::container::map<String, int, std::less<>, pm::allocator<std::pair<const String, int>>>;

int fail(const pm::Status& s) {
  std::fprintf(stderr, "boost_map: %s\n", s.to_string().c_str());
  return 1;
}

// Adds one to the count of `word`. Throws std::bad_alloc when the container is full.
void count(Counts& counts, std::string_view word) {
  auto it = counts.find(word);
  if (it == counts.end()) {
    String key(word.data(), word.size(), counts.get_allocator());
    // A short word sits in the string object itself, which moves into the
    // map's node whole: clear the stack bytes after it first, or `pm check`
    // reads them as pointers (pm/allocator.h, "Short strings").
    pm::zero_unused(key);
    it = counts.emplace(std::move(key), 0).first;
  }
  it->second++;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: boost_map CONTAINER [WORD...]\n");
    return 2;
  }
  pm::Options o;
  o.create_if_missing = true;
  o.layout = "boost_map";
  auto c = pm::Container::open(argv[1], o);
  if (!c.ok()) return fail(c.status());
  pm::Result<Counts*> counts =
      pm::find_or_construct<Counts>(**c, "counts", pm::allocator<char>(**c));
  if (!counts.ok()) return fail(counts.status());
  try {
    for (int i = 2; i < argc; i++) count(**counts, argv[i]);
  } catch (const std::bad_alloc&) {
    return fail(pm::Status::no_space("container full; nothing of this run was counted"));
  }
  if (pm::Status s = (*c)->commit(); !s.ok()) return fail(s);
  for (const auto& [word, n] : **counts) std::printf("%s %d\n", word.c_str(), n);
  return 0;
}
