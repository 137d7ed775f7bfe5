#include "bench/common/memory_usage.h"

#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>

namespace pm::bench {

namespace {

// "Name:   1234 kB" -> bytes, when the line starts with `name`.
bool kib_field(const std::string& line, const char* name, uint64_t* bytes) {
  size_t n = std::strlen(name);
  if (line.compare(0, n, name) != 0) return false;
  *bytes = std::stoull(line.substr(n)) * 1024;
  return true;
}

}  // namespace

Result<uint64_t> process_rss_anon() {
  std::ifstream in("/proc/self/status");
  if (!in) return Status::io_error("cannot read /proc/self/status");
  std::string line;
  uint64_t v = 0;
  while (std::getline(in, line)) {
    if (kib_field(line, "RssAnon:", &v)) return v;
  }
  return Status::io_error("no RssAnon in /proc/self/status");
}

Result<RangeMemory> range_memory(uint64_t begin, uint64_t end) {
  std::ifstream in("/proc/self/smaps");
  if (!in) return Status::io_error("cannot read /proc/self/smaps");
  RangeMemory m;
  std::string line;
  bool inside = false;
  while (std::getline(in, line)) {
    unsigned long long lo = 0, hi = 0;
    // A mapping's header line is "lo-hi perms ..."; field lines are "Name: value".
    if (std::sscanf(line.c_str(), "%llx-%llx ", &lo, &hi) == 2 && line.find(':') > line.find(' ')) {
      inside = lo < end && hi > begin;
      continue;
    }
    if (!inside) continue;
    uint64_t v = 0;
    if (kib_field(line, "Rss:", &v)) m.rss += v;
    if (kib_field(line, "Anonymous:", &v)) m.anonymous += v;
  }
  return m;
}

}  // namespace pm::bench
