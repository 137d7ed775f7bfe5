#include "kvstore/pending_keys.h"

namespace kv {

void PendingKeys::forget_before(PerLog& l, uint64_t cursor) {
  while (!l.order.empty() && l.order.front().first < cursor) {
    Keys::iterator k = l.order.front().second;
    if (--k->second == 0) keys_.erase(k);
    l.order.pop_front();
  }
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
  Record rec;
  for (uint64_t pos = l.end; pos < tail; pos += rec.header.len) {
    if (!log.read(pos, limits, &rec)) {
      return Status::corruption("log " + std::to_string(i) + ": record at " + std::to_string(pos) +
                                " does not validate");
    }
    for (const Op& op : rec.ops) {
      auto k = keys_.find(op.key);  // a key logged again allocates nothing
      if (k == keys_.end()) k = keys_.emplace(std::string(op.key), 0).first;
      k->second++;
      l.order.emplace_back(pos, k);
    }
    l.end = pos + rec.header.len;
  }
  return Status();
}

bool PendingKeys::collect(std::string_view after, bool inclusive, std::string_view end,
                          size_t max, std::vector<std::string>* out) const {
  std::lock_guard<std::mutex> g(mu_);
  auto k = inclusive ? keys_.lower_bound(after) : keys_.upper_bound(after);
  for (size_t n = 0; k != keys_.end() && (end.empty() || k->first < end); ++k, ++n) {
    if (n == max) return true;
    out->push_back(k->first);
  }
  return false;
}

}  // namespace kv
