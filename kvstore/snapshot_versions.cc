#include "kvstore/snapshot_versions.h"

#include <algorithm>
#include <utility>

namespace kv {

SnapshotVersions::Snapshot SnapshotVersions::open(const std::atomic<uint64_t>& next_seq,
                                                  Range range) {
  open_.fetch_add(1, std::memory_order_seq_cst);
  // S is read under mu_ and pinned at once, so that collect() either sees
  // it pinned or runs before S is read: then S >= every pinned snapshot,
  // and nothing collect() drops (replaced at or before the oldest pinned
  // one) is newer than S.
  std::lock_guard<std::mutex> l(mu_);
  const uint64_t s = next_seq.load(std::memory_order_seq_cst) - 1;
  try {
    return Snapshot{s, pinned_.emplace(s, std::move(range))};
  } catch (...) {  // out of memory: not counted, or updates would keep forever
    open_.fetch_sub(1, std::memory_order_seq_cst);
    throw;
  }
}

void SnapshotVersions::release(const Snapshot& s) {
  decltype(kept_) dropped;  // freed outside the lock
  {
    std::lock_guard<std::mutex> l(mu_);
    const bool oldest = pinned_.begin()->first == s.seq;
    pinned_.erase(s.pin);
    // Under mu_: a snapshot opening meanwhile has counted itself before an
    // update kept anything for it, and that keep() came before this lock.
    if (open_.fetch_sub(1, std::memory_order_seq_cst) == 1) {
      dropped.swap(kept_);
      by_replacement_ = {};
      versions_ = 0;
    } else if (oldest) {
      collect();
    }
  }
}

bool SnapshotVersions::read_by(std::string_view key, uint64_t from, uint64_t to) const {
  for (auto it = pinned_.lower_bound(from); it != pinned_.end() && it->first < to; ++it) {
    if (it->second.covers(key)) return true;
  }
  return false;
}

bool SnapshotVersions::may_keep(std::string_view key, uint64_t replaced_by) const {
  std::lock_guard<std::mutex> l(mu_);
  return read_by(key, 0, replaced_by);
}

void SnapshotVersions::keep(std::string_view key, uint64_t old_seq, bool present,
                            std::string_view value, uint64_t replaced_by) {
  std::lock_guard<std::mutex> l(mu_);
  // The snapshots this update saw have all closed since: a snapshot
  // opening now counts itself after this load, so reads a number past
  // replaced_by, and needs nothing replaced by it.
  if (open_.load(std::memory_order_seq_cst) == 0) return;
  // Only a snapshot s with old_seq <= s < replaced_by sees this version,
  // and only one whose range holds the key reads it. A snapshot not pinned
  // yet reads its number after this lock, so past replaced_by: the pinned
  // ones are all there are to ask. Without this, a key overwritten k times
  // under one open snapshot kept k versions, and a scan of 100 keys beside
  // a writer kept what it wrote all over the key space.
  if (!read_by(key, old_seq, replaced_by)) return;
  auto it = kept_.find(key);
  if (it == kept_.end()) it = kept_.emplace(std::string(key), std::vector<Version>()).first;
  it->second.push_back(Version{old_seq, replaced_by, present,
                               present ? std::string(value) : std::string()});
  versions_++;
  by_replacement_.push({replaced_by, std::string(key)});
}

bool SnapshotVersions::find(std::string_view key, uint64_t s, std::string* value,
                            bool* present) const {
  std::lock_guard<std::mutex> l(mu_);
  auto it = kept_.find(key);
  if (it == kept_.end()) return false;
  for (const Version& v : it->second) {
    if (v.seq <= s && s < v.replaced_by) {
      *present = v.present;
      if (v.present) value->assign(v.value);
      return true;
    }
  }
  return false;
}

bool SnapshotVersions::keys(std::string_view after, bool inclusive, std::string_view last,
                            std::string_view end, size_t max,
                            std::vector<std::string>* out) const {
  std::lock_guard<std::mutex> l(mu_);
  auto it = inclusive ? kept_.lower_bound(after) : kept_.upper_bound(after);
  for (; it != kept_.end(); ++it) {
    const std::string& k = it->first;
    if (!last.empty() ? k > last : (!end.empty() && k >= end)) return false;
    if (out->size() == max) return true;
    out->push_back(k);
  }
  return false;
}

uint64_t SnapshotVersions::open_snapshots() const { return open_.load(); }

uint64_t SnapshotVersions::kept_versions() const {
  std::lock_guard<std::mutex> l(mu_);
  return versions_;
}

void SnapshotVersions::collect() {
  // A version replaced by update n serves snapshots older than n only, and
  // every snapshot open or opening is at least the oldest pinned one (see
  // open()). With none pinned, one is opening: keep everything. The heap
  // hands out the versions in the order they expire: the cost is what is
  // dropped, not what is kept.
  if (pinned_.empty()) return;
  const uint64_t oldest = pinned_.begin()->first;
  while (!by_replacement_.empty() && by_replacement_.top().first <= oldest) {
    auto it = kept_.find(by_replacement_.top().second);
    by_replacement_.pop();
    if (it == kept_.end()) continue;  // dropped through an earlier entry
    versions_ -= std::erase_if(it->second, [&](const Version& v) { return v.replaced_by <= oldest; });
    if (it->second.empty()) kept_.erase(it);
  }
}

}  // namespace kv
