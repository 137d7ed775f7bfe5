// Ordered reads (Store::scan, Store::iterator): the backend's ordered index
// merged with the keys of records not yet applied to it, each key's value
// read as a get would (the frontend, else the backend).
//
// Why every acknowledged update is seen: its record is either applied
// (then its key is in the index, unless a later update removed it), or at
// or past its log's gleaner cursor when the reader collects the pending
// keys (Gleaner::pending_keys), which happens before the index is read. A
// key found either way is read like a get, which sees the newest
// acknowledged value. A key can be found both ways: the merge reports it
// once.
#include <algorithm>

#include "kvstore/store_impl.h"

namespace kv {

std::string Store::prefix_end(std::string_view prefix) {
  std::string end(prefix);
  while (!end.empty() && static_cast<unsigned char>(end.back()) == 0xff) end.pop_back();
  if (!end.empty()) end.back() = static_cast<char>(static_cast<unsigned char>(end.back()) + 1);
  return end;
}

Status StoreImpl::read_for_scan(std::string_view key, std::string* value, bool* found) {
  const uint64_t h = hash_key(key);
  bool tomb = false;
  {
    Reclaimer::Guard g;
    const bool hit = fe_.read(key, h, [&](const Item& it) {
      tomb = it.tombstone;
      if (!tomb) value->assign(it.value());
    });
    if (hit) {
      *found = !tomb;
      return Status();
    }
  }
  return miss(key, h, value, found, /*install=*/false);
}

// Produces the keys of [from, end) in order, with their values, a batch at
// a time; no lock is held between batches.
class OrderedReader {
 public:
  OrderedReader(StoreImpl* s, std::string end) : s_(s), end_(std::move(end)) {}

  // Starts at the first key >= from.
  Status seek(std::string_view from) {
    PM_TRY(s_->stop_.status());
    after_ = from;
    inclusive_ = true;
    index_.clear();
    next_index_ = 0;
    index_done_ = false;
    next_pending_ = 0;
    PM_TRY(s_->gleaner_->pending_keys(from, end_, &pending_));
    if (s_->be_->index() == nullptr) return load_unindexed(from);
    return Status();
  }

  // Appends up to max pairs past the last one returned; fewer at the end.
  Status next_batch(size_t max, std::vector<std::pair<std::string, std::string>>* out) {
    std::string value;
    for (size_t got = 0; got < max;) {
      if (next_index_ == index_.size() && !index_done_) PM_TRY(refill(std::max<size_t>(max, 64)));
      while (next_pending_ < pending_.size() && !after(pending_[next_pending_])) next_pending_++;
      const std::string* k = nullptr;
      if (next_index_ < index_.size()) k = &index_[next_index_];
      if (next_pending_ < pending_.size() && (k == nullptr || pending_[next_pending_] < *k)) {
        k = &pending_[next_pending_];
      }
      if (k == nullptr) break;
      const std::string key = *k;
      if (next_index_ < index_.size() && index_[next_index_] == key) next_index_++;
      if (next_pending_ < pending_.size() && pending_[next_pending_] == key) next_pending_++;
      after_ = key;
      inclusive_ = false;
      bool found = false;
      PM_TRY(s_->read_for_scan(key, &value, &found));
      if (!found) continue;
      out->emplace_back(key, std::move(value));
      got++;
    }
    return Status();
  }

 private:
  bool after(const std::string& k) const { return inclusive_ ? k >= after_ : k > after_; }

  Status refill(size_t n) {
    index_.clear();
    next_index_ = 0;
    PM_TRY(s_->be_->index()->collect(after_, inclusive_, end_, n, &index_));
    index_done_ = index_.size() < n;
    return Status();
  }

  // An older store opened read-only has no index: its keys in the range,
  // found by a pass over the table, sorted once.
  Status load_unindexed(std::string_view from) {
    index_done_ = true;
    PM_TRY(s_->be_->scan("", [&](std::string_view k, std::string_view) {
      if (k >= from && (end_.empty() || k < end_)) index_.emplace_back(k);
      return true;
    }));
    std::sort(index_.begin(), index_.end());
    return Status();
  }

  StoreImpl* s_;
  std::string end_;
  std::string after_;
  bool inclusive_ = true;
  std::vector<std::string> index_;  // a batch of the index's keys
  size_t next_index_ = 0;
  bool index_done_ = false;
  std::vector<std::string> pending_;  // keys of records not yet applied
  size_t next_pending_ = 0;
};

Status StoreImpl::scan(std::string_view begin, std::string_view end, uint64_t limit,
                       const ScanFn& fn) {
  OrderedReader r(this, std::string(end));
  PM_TRY(r.seek(begin));
  std::vector<std::pair<std::string, std::string>> batch;
  for (uint64_t seen = 0;;) {
    batch.clear();
    const uint64_t want = limit == 0 ? 256 : std::min<uint64_t>(256, limit - seen);
    PM_TRY(r.next_batch(want, &batch));
    for (const auto& [k, v] : batch) {
      if (!fn(k, v)) return Status();
    }
    seen += batch.size();
    if (batch.size() < want || (limit != 0 && seen >= limit)) return Status();
  }
}

namespace {

class StoreIterator final : public Store::Iterator {
 public:
  StoreIterator(StoreImpl* s, std::string end) : r_(s, std::move(end)) {}

  void seek(std::string_view key) override {
    batch_.clear();
    pos_ = 0;
    done_ = false;
    status_ = r_.seek(key);
    fill();
  }
  bool valid() const override { return status_.ok() && pos_ < batch_.size(); }
  void next() override {
    if (++pos_ == batch_.size()) fill();
  }
  std::string_view key() const override { return batch_[pos_].first; }
  std::string_view value() const override { return batch_[pos_].second; }
  Status status() const override { return status_; }

 private:
  static constexpr size_t kBatch = 128;
  void fill() {
    batch_.clear();
    pos_ = 0;
    if (!status_.ok() || done_) return;
    status_ = r_.next_batch(kBatch, &batch_);
    done_ = batch_.size() < kBatch;
  }

  OrderedReader r_;
  std::vector<std::pair<std::string, std::string>> batch_;
  size_t pos_ = 0;
  bool done_ = true;
  Status status_ = Status::invalid_argument("iterator: seek() before reading");
};

}  // namespace

std::unique_ptr<Store::Iterator> StoreImpl::iterator(std::string_view end) {
  return std::make_unique<StoreIterator>(this, std::string(end));
}

}  // namespace kv
