#include "crash/kv_model.h"

#include <xxhash.h>

#include <algorithm>

namespace pm::crash {

uint64_t digest_of(const KvMap& m) {
  XXH3_state_t* st = XXH3_createState();
  XXH3_64bits_reset(st);
  for (const auto& [k, v] : m) {
    uint64_t n[2] = {k.size(), v.size()};
    XXH3_64bits_update(st, n, sizeof n);
    XXH3_64bits_update(st, k.data(), k.size());
    XXH3_64bits_update(st, v.data(), v.size());
  }
  uint64_t d = XXH3_64bits_digest(st);
  XXH3_freeState(st);
  return d;
}

void KvModel::reset(KvMap base) {
  base_ = std::move(base);
  updates_.clear();
}

uint64_t KvModel::begin(std::vector<Change> changes) {
  // Within one update the last change of a key wins (as in the store).
  std::vector<Change> last;
  for (Change& c : changes) {
    auto it = std::find_if(last.begin(), last.end(), [&](const Change& l) { return l.key == c.key; });
    if (it != last.end()) last.erase(it);
    last.push_back(std::move(c));
  }
  const uint64_t id = next_id_++;
  updates_[id].changes = std::move(last);
  return id;
}

void KvModel::logged(uint64_t id) {
  auto it = updates_.find(id);
  if (it == updates_.end() || it->second.order >= 0) return;
  const KvMap now = visible();
  std::erase_if(it->second.changes,
                [&](const Change& c) { return !c.value && now.count(c.key) == 0; });
  it->second.order = next_order_++;
}

void KvModel::returned(uint64_t id, const Status& s, bool async) {
  auto it = updates_.find(id);
  if (it == updates_.end()) return;
  Update& u = it->second;
  if (u.order < 0) {  // never logged: it changed nothing
    updates_.erase(it);
    return;
  }
  u.done = true;
  u.returned_at = clock_++;
  u.acked = s.ok() && !async;
  fold();
}

void KvModel::synced(uint64_t ticket) {
  for (auto& [id, u] : updates_) {
    if (u.done && u.order >= 0 && u.returned_at < ticket) u.acked = true;
  }
  fold();
}

void KvModel::apply(const Update& u, KvMap* m) {
  for (const Change& c : u.changes) {
    if (c.value) {
      (*m)[c.key] = *c.value;
    } else {
      m->erase(c.key);
    }
  }
}

std::vector<const KvModel::Update*> KvModel::in_log_order() const {
  std::vector<const Update*> v;
  for (const auto& [id, u] : updates_) {
    if (u.order >= 0) v.push_back(&u);
  }
  std::sort(v.begin(), v.end(), [](const Update* a, const Update* b) { return a->order < b->order; });
  return v;
}

void KvModel::fold() {
  std::vector<const Update*> v = in_log_order();
  for (const Update* u : v) {
    if (!u->acked) return;
    apply(*u, &base_);
    std::erase_if(updates_, [u](const auto& e) { return &e.second == u; });
  }
}

size_t KvModel::uncertain() const {
  size_t n = 0;
  for (const auto& [id, u] : updates_) n += u.order >= 0 && !u.acked;
  return n;
}

KvMap KvModel::visible() const {
  KvMap m = base_;
  for (const Update* u : in_log_order()) apply(*u, &m);
  return m;
}

std::vector<uint64_t> KvModel::allowed(size_t cap) const {
  const std::vector<const Update*> v = in_log_order();
  std::vector<size_t> open;  // indexes of the uncertain ones
  for (size_t i = 0; i < v.size(); i++) {
    if (!v[i]->acked) open.push_back(i);
  }
  std::vector<uint64_t> out;
  const uint64_t subsets = open.size() >= 20 ? (1ull << 20) : (1ull << open.size());
  for (uint64_t mask = 0; mask < subsets && out.size() < cap; mask++) {
    KvMap m = base_;
    size_t bit = 0;
    for (size_t i = 0; i < v.size(); i++) {
      const bool keep = v[i]->acked || ((mask >> bit) & 1);
      if (!v[i]->acked) bit++;
      if (keep) apply(*v[i], &m);
    }
    const uint64_t d = digest_of(m);
    if (std::find(out.begin(), out.end(), d) == out.end()) out.push_back(d);
  }
  return out;
}

}  // namespace pm::crash
