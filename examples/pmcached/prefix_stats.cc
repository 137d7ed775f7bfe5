#include "prefix_stats.h"

#include <fmt/format.h>

#include <iterator>

namespace pmcached {

PrefixStats::Counts* PrefixStats::find(std::string_view key) {
  // As memcached: the prefix ends at the first ':' before any NUL byte.
  const size_t end = key.find_first_of(std::string_view(":\0", 2));
  if (end == std::string_view::npos || key[end] != ':') return nullptr;
  const std::string_view prefix = key.substr(0, end);
  auto it = prefixes_.find(prefix);
  if (it == prefixes_.end()) it = prefixes_.emplace(std::string(prefix), Counts()).first;
  return &it->second;
}

void PrefixStats::record_get(std::string_view key, bool hit) {
  if (!on_.load(std::memory_order_relaxed)) return;
  std::lock_guard<std::mutex> l(mu_);
  if (Counts* c = find(key)) {
    c->gets++;
    c->hits += hit;
  }
}

void PrefixStats::record_set(std::string_view key) {
  if (!on_.load(std::memory_order_relaxed)) return;
  std::lock_guard<std::mutex> l(mu_);
  if (Counts* c = find(key)) c->sets++;
}

void PrefixStats::record_delete(std::string_view key) {
  if (!on_.load(std::memory_order_relaxed)) return;
  std::lock_guard<std::mutex> l(mu_);
  if (Counts* c = find(key)) c->deletes++;
}

void PrefixStats::dump(std::string* out) const {
  std::lock_guard<std::mutex> l(mu_);
  for (const auto& [prefix, c] : prefixes_) {
    fmt::format_to(std::back_inserter(*out), "PREFIX {} get {} hit {} set {} del {}\r\n", prefix,
                   c.gets, c.hits, c.sets, c.deletes);
  }
  out->append("END\r\n");
}

void PrefixStats::clear() {
  std::lock_guard<std::mutex> l(mu_);
  prefixes_.clear();
}

}  // namespace pmcached
