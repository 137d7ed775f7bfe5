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

Status StoreImpl::read_for_scan(std::string_view key, uint64_t h, std::string* value,
                                bool* found) {
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

  // The next pairs past the last one returned, into (*out)[0, *n): up to
  // max, fewer at the end. The strings of *out are reused.
  Status next_batch(size_t max, std::vector<std::pair<std::string, std::string>>* out,
                    size_t* n) {
    *n = 0;
    if (out->size() < max) out->resize(max);
    while (*n < max) {
      // The next keys in order, then their frontend buckets prefetched
      // together: the keys of a range are scattered over the hash table,
      // and one miss at a time cost most of a scan.
      size_t c = 0;
      for (; c < max - *n; c++) {
        if (next_index_ == index_.size() && !index_done_) PM_TRY(refill(std::max<size_t>(max, 64)));
        while (next_pending_ < pending_.size() && !after(pending_[next_pending_])) next_pending_++;
        const std::string* k = nullptr;
        if (next_index_ < index_.size()) k = &index_[next_index_];
        if (next_pending_ < pending_.size() && (k == nullptr || pending_[next_pending_] < *k)) {
          k = &pending_[next_pending_];
        }
        if (k == nullptr) break;
        if (keys_.size() <= c) keys_.resize(c + 1);
        keys_[c].assign(*k);
        if (next_index_ < index_.size() && index_[next_index_] == keys_[c]) next_index_++;
        if (next_pending_ < pending_.size() && pending_[next_pending_] == keys_[c]) next_pending_++;
        after_ = keys_[c];
        inclusive_ = false;
      }
      if (c == 0) break;
      hashes_.resize(c);
      {
        Reclaimer::Guard g;  // the frontend's table may be retired meanwhile
        for (size_t i = 0; i < c; i++) s_->fe_.prefetch(hashes_[i] = hash_key(keys_[i]));
        for (size_t i = 0; i < c; i++) s_->fe_.prefetch_item(hashes_[i]);
      }
      for (size_t i = 0; i < c; i++) {
        auto& [key, value] = (*out)[*n];
        bool found = false;
        PM_TRY(s_->read_for_scan(keys_[i], hashes_[i], &value, &found));
        if (!found) continue;
        key.assign(keys_[i]);
        ++*n;
      }
    }
    return Status();
  }

 private:
  bool after(const std::string& k) const { return inclusive_ ? k >= after_ : k > after_; }

  // The next n keys of the index, into index_ (its strings reused).
  Status refill(size_t n) {
    size_t got = 0;
    PM_TRY(s_->be_->index()->collect(after_, inclusive_, end_, n, [&](std::string_view k) {
      if (index_.size() <= got) index_.emplace_back();
      index_[got++].assign(k);
    }));
    index_.resize(got);  // (shrinks only at the end of the range)
    next_index_ = 0;
    index_done_ = got < n;
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
  std::vector<std::string> keys_;  // the keys being read (strings reused)
  std::vector<uint64_t> hashes_;
};

Status StoreImpl::scan(std::string_view begin, std::string_view end, uint64_t limit,
                       const ScanFn& fn) {
  OrderedReader r(this, std::string(end));
  PM_TRY(r.seek(begin));
  std::vector<std::pair<std::string, std::string>> batch;
  for (uint64_t seen = 0;;) {
    const uint64_t want = limit == 0 ? 256 : std::min<uint64_t>(256, limit - seen);
    size_t n = 0;
    PM_TRY(r.next_batch(want, &batch, &n));
    for (size_t i = 0; i < n; i++) {
      if (!fn(batch[i].first, batch[i].second)) return Status();
    }
    seen += n;
    if (n < want || (limit != 0 && seen >= limit)) return Status();
  }
}

namespace {

class StoreIterator final : public Store::Iterator {
 public:
  StoreIterator(StoreImpl* s, std::string end) : r_(s, std::move(end)) {}

  void seek(std::string_view key) override {
    n_ = 0;
    pos_ = 0;
    done_ = false;
    status_ = r_.seek(key);
    fill();
  }
  bool valid() const override { return status_.ok() && pos_ < n_; }
  void next() override {
    if (++pos_ == n_) fill();
  }
  std::string_view key() const override { return batch_[pos_].first; }
  std::string_view value() const override { return batch_[pos_].second; }
  Status status() const override { return status_; }

 private:
  static constexpr size_t kBatch = 128;
  void fill() {
    n_ = 0;
    pos_ = 0;
    if (!status_.ok() || done_) return;
    status_ = r_.next_batch(kBatch, &batch_, &n_);
    done_ = n_ < kBatch;
  }

  OrderedReader r_;
  std::vector<std::pair<std::string, std::string>> batch_;  // [0, n_) read
  size_t n_ = 0;
  size_t pos_ = 0;
  bool done_ = true;
  Status status_ = Status::invalid_argument("iterator: seek() before reading");
};

}  // namespace

std::unique_ptr<Store::Iterator> StoreImpl::iterator(std::string_view end) {
  return std::make_unique<StoreIterator>(this, std::string(end));
}

}  // namespace kv
