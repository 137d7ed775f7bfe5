#include "kvstore/pending_keys.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <utility>

#include "kvstore/planted_bugs.h"

namespace kv {

namespace {

// The first 8 bytes of a key, zero-padded, as a number that orders as the
// keys do wherever two of them differ.
uint64_t first_bytes(std::string_view k) {
  uint64_t v = 0;
  if (!k.empty()) std::memcpy(&v, k.data(), std::min<size_t>(8, k.size()));
  if constexpr (std::endian::native == std::endian::little) v = __builtin_bswap64(v);
  return v;
}

}  // namespace

void PendingKeys::Run::add(std::string_view k) {
  bytes.append(k);
  at.push_back(bytes.size());
  first.push_back(first_bytes(k));
}

size_t PendingKeys::Run::seek(std::string_view k, bool inclusive) const {
  const uint64_t p = first_bytes(k);
  size_t lo = 0, hi = size();
  while (lo < hi) {  // the first key not below k (above it, unless inclusive)
    const size_t mid = lo + (hi - lo) / 2;
    const bool below = first[mid] != p ? first[mid] < p
                                       : (inclusive ? key(mid) < k : key(mid) <= k);
    if (below) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo;
}

PendingKeys::Run PendingKeys::merge(const Run& older, const Run& newer) {
  Run m;
  m.end = newer.end;
  m.bytes.reserve(older.bytes.size() + newer.bytes.size());
  m.at.reserve(older.size() + newer.size() + 1);
  m.first.reserve(older.size() + newer.size());
  size_t a = 0, b = 0;
  while (a < older.size() || b < newer.size()) {
    if (b == newer.size() || (a < older.size() && older.key(a) < newer.key(b))) {
      m.add(older.key(a++));
    } else {
      if (a < older.size() && older.key(a) == newer.key(b)) a++;
      m.add(newer.key(b++));
    }
  }
  return m;
}

void PendingKeys::forget_before(PerLog& l, uint64_t cursor) {
  size_t gone = 0;
  while (gone < l.runs.size() && l.runs[gone].end <= cursor) gone++;
  l.runs.erase(l.runs.begin(), l.runs.begin() + static_cast<ptrdiff_t>(gone));
}

void PendingKeys::add_run(PerLog& l, std::vector<std::string_view>* keys, uint64_t end) {
  if (keys->empty()) return;
  std::sort(keys->begin(), keys->end());
  keys->erase(std::unique(keys->begin(), keys->end()), keys->end());
  Run r;
  r.end = end;
  for (std::string_view k : *keys) r.add(k);
  l.runs.push_back(std::move(r));
  // Sizes halve at least from each run to the next newer one: O(log n)
  // runs, and each key merged O(log n) times.
  while (l.runs.size() >= 2 && 2 * l.runs.back().size() >= l.runs[l.runs.size() - 2].size()) {
    Run m = merge(l.runs[l.runs.size() - 2], l.runs.back());
    l.runs.pop_back();
    l.runs.back() = std::move(m);
  }
}

void PendingKeys::trust_flags_from(uint32_t i, uint64_t pos) {
  std::lock_guard<std::mutex> g(mu_);
  logs_[i].trusted = pos;
}

void PendingKeys::forget(uint32_t i, uint64_t cursor) {
  std::lock_guard<std::mutex> g(mu_);
  forget_before(logs_[i], cursor);
}

Status PendingKeys::update(uint32_t i, const Log& log, const Limits& limits, uint64_t cursor,
                           uint64_t tail) {
  std::lock_guard<std::mutex> g(mu_);
  PerLog& l = logs_[i];
  forget_before(l, cursor);
  if (l.end < cursor) l.end = cursor;  // all it had read is applied
  // The keys are copied out of each record (its bytes are reused by the
  // next), then sorted as views of the copy.
  std::string raw;
  std::vector<std::pair<size_t, size_t>> spans;
  Record rec;
  Status s;
  uint64_t pos = l.end;
  for (; pos < tail; pos += rec.header.len) {
    if (!log.read(pos, limits, &rec)) {
      s = Status::corruption("log " + std::to_string(i) + ": record at " + std::to_string(pos) +
                             " does not validate");
      break;
    }
    const bool trusted = pos >= l.trusted || g_kv_planted_bugs.index_flag_of_any_session;
    for (const Op& op : rec.ops) {
      if (op.op == OpCode::kRemove || (op.key_indexed && trusted)) continue;
      spans.emplace_back(raw.size(), op.key.size());
      raw.append(op.key);
    }
  }
  std::vector<std::string_view> keys;
  keys.reserve(spans.size());
  for (auto [at, n] : spans) keys.push_back(std::string_view(raw).substr(at, n));
  add_run(l, &keys, pos);
  l.end = pos;
  return s;
}

bool PendingKeys::collect(std::string_view after, bool inclusive, std::string_view end,
                          size_t max, std::vector<std::string>* out) const {
  std::lock_guard<std::mutex> g(mu_);
  struct Cursor {
    const Run* run;
    size_t i;
  };
  std::vector<Cursor> cur;
  for (const PerLog& l : logs_) {
    for (const Run& r : l.runs) {
      const size_t i = r.seek(after, inclusive);
      if (i < r.size() && (end.empty() || r.key(i) < end)) cur.push_back({&r, i});
    }
  }
  // A merge of the runs: each step takes the least key and moves every run
  // at it past it. There are few runs (O(log n) per log with records).
  for (size_t n = 0; !cur.empty(); n++) {
    std::string_view least = cur[0].run->key(cur[0].i);
    for (const Cursor& c : cur) least = std::min(least, c.run->key(c.i));
    if (n == max) return true;
    out->emplace_back(least);
    std::erase_if(cur, [&](Cursor& c) {
      if (c.run->key(c.i) != least) return false;
      ++c.i;
      return c.i == c.run->size() || (!end.empty() && c.run->key(c.i) >= end);
    });
  }
  return false;
}

size_t PendingKeys::held() const {
  std::lock_guard<std::mutex> g(mu_);
  size_t n = 0;
  for (const PerLog& l : logs_) {
    for (const Run& r : l.runs) n += r.size();
  }
  return n;
}

}  // namespace kv
