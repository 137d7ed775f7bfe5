// Ordered reads (Store::scan, Store::iterator): the backend's ordered index
// merged with the keys of records not yet applied to it, each key's value
// read as a get would (the frontend, else the backend).
//
// Why every acknowledged update is seen: its record is either applied
// (then its key is in the index, unless a later update removed it), or at
// or past its log's gleaner cursor when the reader collects the pending
// keys (Gleaner::pending_keys), which happens before the index is read;
// the pending keys leave out removes and this session's puts logged as
// kOpKeyIndexed, whose keys the index already holds (key_indexed() in
// store.cc, pending_keys.h). A key found either way is read like a get,
// which sees the newest acknowledged value. A key can be found both ways
// (and a pending key may be one applied since): the merge reports it
// once. Pending keys come in batches (a writer's backlog can hold tens of
// thousands); each new batch is followed by reading the index again from
// the same key, so that the index keys merged with a batch are always read
// after it.
#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kvstore/planted_bugs.h"
#include "kvstore/store_impl.h"
#include "libpm/c_guard.h"
#include "libpm/sync_point.h"

namespace kv {

std::string Store::prefix_end(std::string_view prefix) {
  std::string end(prefix);
  while (!end.empty() && static_cast<unsigned char>(end.back()) == 0xff) end.pop_back();
  if (!end.empty()) end.back() = static_cast<char>(static_cast<unsigned char>(end.back()) + 1);
  return end;
}

namespace {
// A few to some tens of microseconds of pause instructions, by the CPU.
constexpr int kSpinsBeforeYield = 1000;
}  // namespace

SnapshotVersions::Snapshot StoreImpl::open_snapshot(std::string_view begin,
                                                    std::string_view end) {
  // Every update made while a snapshot is open keeps a copy of what it
  // replaces (in the snapshot's range), so the reader's slowest step,
  // reading the records its writers logged since it last looked, comes
  // before the snapshot opens. A record that fails to read here fails the
  // seek that reads it again.
  if (gleaner_ != nullptr) (void)gleaner_->read_pending();
  const SnapshotVersions::Snapshot opened =
      versions_.open(next_seq_, {std::string(begin), std::string(end)});
  const uint64_t snap = opened.seq;
  // Every update numbered <= snap took its number holding a log's writer
  // lock, with that log's in_flight set before (LogState): wait until no
  // log has one in flight. An update that sets in_flight after this reads
  // it took its number after snap was read, so past snap; one that cleared
  // it is installed, its record logged where the pending keys find it.
  if (g_kv_planted_bugs.snapshot_skips_in_flight) return opened;
  // An update is in flight while it keeps copies for snapshots and its
  // record persists: a microsecond or two on pmem, far less than a yield
  // that hands the core to a gleaner for its time slice. So the wait spins
  // before it yields.
  for (uint32_t i = 0; logs_ != nullptr && i < logs_->size(); i++) {
    const LogState* L = logs_->at(i);
    for (int turns = 0;; turns++) {
      const uint64_t n = L->in_flight.load();
      if (n == 0 || (n != LogState::kTakingSeq && n > snap)) break;
      if (turns < kSpinsBeforeYield && pm::sync_point::hook() == nullptr) {
        cpu_relax();
      } else {
        pm::sync_point::spin("kv.snapshot.wait_writer");
      }
    }
  }
  return opened;
}

Status StoreImpl::read_for_scan(std::string_view key, uint64_t h, uint64_t snap,
                                std::string* value, bool* found, bool* missed) {
  bool tomb = false;
  uint64_t seq = 0;
  {
    Reclaimer::Guard g;
    const bool hit = fe_.read(key, h, [&](const Item& it) {
      tomb = it.tombstone;
      seq = it.seq;
      if (!tomb) value->assign(it.value());
    });
    *found = hit && !tomb;
    *missed = !hit;
  }
  if (*missed) PM_TRY(miss(key, h, value, found, /*install=*/false, &seq));
  // Newer than the snapshot: the update that replaced the version the
  // snapshot sees kept it before it became visible (snapshot_versions.h);
  // none kept means the key did not exist at snap. An absent key's number
  // may be lost (an epoch purges the ghost of a remove): one kept wins.
  if ((seq > snap || !*found) && !versions_.find(key, snap, value, found)) *found = false;
  return Status();
}

// Produces the keys of [from, end) in order, with their values, a batch at
// a time; no lock is held between batches.
class OrderedReader {
 public:
  OrderedReader() = default;

  // Reads s at snapshot snap, up to end, from the next seek on. The
  // strings of the last scan are kept for reuse: a 16-byte key does not fit
  // in a short string, and allocating every key and value again cost a
  // fifth of a scan.
  void reset(StoreImpl* s, std::string_view end, uint64_t snap) {
    if (s_ != s) cold_ = false;
    s_ = s;
    snap_ = snap;
    end_.assign(end);
    if (pending_.capacity() > 4096) std::vector<std::string>().swap(pending_);
  }

  // Starts at the first key >= from.
  Status seek(std::string_view from) {
    PM_TRY(s_->stop_.status());
    after_ = from;
    inclusive_ = true;
    PM_TRY(fetch_pending());
    if (s_->be_->index() == nullptr) return load_unindexed(from);
    return Status();
  }

  // The next pairs past the last one returned, into (*out)[0, *n): up to
  // max, fewer at the end. The strings of *out are reused. On an error,
  // (*out)[0, *n) holds the pairs read before it: a damaged value must not
  // take the readable keys before it down with it.
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
        if (next_pending_ == pending_.size() && pending_more_) PM_TRY(fetch_pending());
        if (next_index_ == index_len_ && !index_done_) PM_TRY(refill(std::max<size_t>(max, 64)));
        if (next_kept_ == kept_.size() && kept_more_) fetch_kept();
        while (next_pending_ < pending_.size() && !after(pending_[next_pending_])) next_pending_++;
        const std::string* k = nullptr;
        if (next_index_ < index_len_) k = &index_[next_index_];
        if (next_pending_ < pending_.size() && (k == nullptr || pending_[next_pending_] < *k)) {
          k = &pending_[next_pending_];
        }
        if (next_kept_ < kept_.size() && (k == nullptr || kept_[next_kept_] < *k)) {
          k = &kept_[next_kept_];
        }
        if (k == nullptr) break;
        if (keys_.size() <= c) keys_.resize(c + 1);
        if (indexed_.size() <= c) indexed_.resize(c + 1);
        keys_[c].assign(*k);
        indexed_[c] = next_index_ < index_len_ && index_[next_index_] == keys_[c];
        if (indexed_[c]) next_index_++;
        if (next_pending_ < pending_.size() && pending_[next_pending_] == keys_[c]) next_pending_++;
        if (next_kept_ < kept_.size() && kept_[next_kept_] == keys_[c]) next_kept_++;
        after_ = keys_[c];
        inclusive_ = false;
      }
      if (c == 0) break;
      hashes_.resize(c);
      for (size_t i = 0; i < c; i++) hashes_[i] = hash_key(keys_[i]);
      // A pipeline: key i's bucket is prefetched 2 * kAhead keys before it
      // is read, its item kAhead keys before (once the bucket has had time
      // to arrive: reading a bucket still in flight stalls for all of its
      // miss). Prefetching all items right after all buckets stalled on
      // the buckets (docs/ordered.md, measured).
      // When more than an eighth of the last batch's keys missed the
      // frontend (a store just opened: a mount's index, `pm kv ls
      // --values`), the backend's chain head and first entry go through the
      // same pipeline; scans of keys the frontend holds skip that cost.
      Reclaimer::Guard g;  // the frontend's table may be retired meanwhile
      const bool cold = cold_;
      size_t misses = 0;
      for (size_t i = 0; i < c + 2 * kAhead; i++) {
        if (i < c) {
          s_->fe_.prefetch(hashes_[i]);
          if (cold) s_->be_->prefetch_for_read(hashes_[i], false);
        }
        if (i >= kAhead && i - kAhead < c) {
          s_->fe_.prefetch_item(hashes_[i - kAhead]);
          if (cold) s_->be_->prefetch_for_read(hashes_[i - kAhead], true);
        }
        if (i < 2 * kAhead) continue;
        const size_t k = i - 2 * kAhead;
        auto& [key, value] = (*out)[*n];
        bool found = false, missed = false;
        PM_TRY(s_->read_for_scan(keys_[k], hashes_[k], snap_, &value, &found, &missed));
        misses += missed;
        if (!found) {
          // Read from the index, and neither the frontend nor the table
          // holds it: removed meanwhile, or a damaged index key standing
          // for one the scan would silently leave out (rare: no cost to
          // the scan otherwise).
          if (missed && indexed_[k]) PM_TRY(s_->be_->check_indexed(keys_[k], hashes_[k]));
          continue;
        }
        key.assign(keys_[k]);
        ++*n;
      }
      cold_ = misses * 8 > c;
    }
    return Status();
  }

 private:
  // How many keys ahead of the one read its item is prefetched (and its
  // bucket twice as far): enough misses in flight to hide one's latency.
  static constexpr size_t kAhead = 8;

  // Pending keys come this many at a time.
  static constexpr size_t kPendingBatch = 256;

  bool after(const std::string& k) const { return inclusive_ ? k >= after_ : k > after_; }

  // The next pending keys past after_, then the index from there again
  // (see the top of this file). Without an index, all of them at once.
  Status fetch_pending() {
    pending_.clear();
    next_pending_ = 0;
    const size_t max = s_->be_->index() == nullptr ? SIZE_MAX : kPendingBatch;
    PM_TRY(s_->gleaner_->pending_keys(after_, inclusive_, end_, max, &pending_, &pending_more_));
    index_len_ = 0;
    next_index_ = 0;
    index_done_ = false;
    kept_.clear();
    next_kept_ = 0;
    kept_more_ = false;
    return Status();
  }

  // The next n keys of the index, into index_ (its strings reused).
  Status refill(size_t n) {
    size_t got = 0;
    PM_TRY(s_->be_->index()->collect(after_, inclusive_, end_, n, [&](std::string_view k) {
      if (index_.size() <= got) index_.emplace_back();
      index_[got++].assign(k);
    }));
    index_len_ = got;
    next_index_ = 0;
    index_done_ = got < n;
    fetch_kept();
    return Status();
  }

  // The keys with versions kept for snapshots, over the index keys just
  // read: a key that left the index after the snapshot was kept before its
  // remove was logged, so before it left the index, so before the index was
  // read (see the top of this file).
  // They come kPendingBatch at a time: fetched again from the position
  // when those run out (the index window, and so `last`, unchanged).
  void fetch_kept() {
    kept_.clear();
    next_kept_ = 0;
    const std::string_view last = index_done_ || index_len_ == 0 ? std::string_view()
                                                                  : index_[index_len_ - 1];
    kept_more_ = s_->versions_.keys(after_, inclusive_, last, end_, kPendingBatch, &kept_);
  }

  // An older store opened read-only has no index: its keys in the range,
  // found by a pass over the table, sorted once.
  Status load_unindexed(std::string_view from) {
    index_done_ = true;
    index_.clear();
    PM_TRY(s_->be_->scan("", [&](std::string_view k, std::string_view) {
      if (k >= from && (end_.empty() || k < end_)) index_.emplace_back(k);
      return true;
    }));
    std::sort(index_.begin(), index_.end());
    index_len_ = index_.size();
    fetch_kept();
    return Status();
  }

  StoreImpl* s_ = nullptr;
  uint64_t snap_ = 0;
  std::string end_;
  std::string after_;
  bool inclusive_ = true;
  std::vector<std::string> index_;  // [0, index_len_): a batch of the index's keys
  size_t index_len_ = 0;
  size_t next_index_ = 0;
  bool index_done_ = false;
  bool cold_ = false;  // more than an eighth of the last batch missed the frontend
  std::vector<std::string> pending_;  // a batch of the keys of records not yet applied
  size_t next_pending_ = 0;
  bool pending_more_ = false;  // past pending_, the logs hold more
  std::vector<std::string> kept_;  // keys with kept versions, up to the index's last
  size_t next_kept_ = 0;
  bool kept_more_ = false;  // past kept_, more keys up to the window's last
  std::vector<std::string> keys_;  // the keys being read (strings reused)
  std::vector<char> indexed_;      // keys_[i] came from the index
  std::vector<uint64_t> hashes_;
};

// An open snapshot of a store, closed when it goes.
class ScanSnapshot {
 public:
  ScanSnapshot() = default;
  ScanSnapshot(StoreImpl* s, std::string_view begin, std::string_view end)
      : s_(s), snap_(s->open_snapshot(begin, end)) {}
  ScanSnapshot(const ScanSnapshot&) = delete;
  ScanSnapshot& operator=(ScanSnapshot&& o) noexcept {
    std::swap(s_, o.s_);
    std::swap(snap_, o.snap_);
    return *this;
  }
  ~ScanSnapshot() {
    if (s_ != nullptr) s_->close_snapshot(snap_);
  }
  uint64_t seq() const { return snap_.seq; }

 private:
  StoreImpl* s_ = nullptr;
  SnapshotVersions::Snapshot snap_;
};

namespace {

// A thread's reader and batch, kept between scans (their strings reused).
struct ScanScratch {
  OrderedReader reader;
  std::vector<std::pair<std::string, std::string>> batch;
  bool busy = false;  // a scan from inside a scan's callback gets its own
};

}  // namespace

Status StoreImpl::scan(std::string_view begin, std::string_view end, uint64_t limit,
                       const ScanFn& fn) {
  return pm::status_of([&] { return scan_unguarded(begin, end, limit, fn); });
}

Status StoreImpl::scan_unguarded(std::string_view begin, std::string_view end, uint64_t limit,
                                 const ScanFn& fn) {
  thread_local ScanScratch mine;
  std::unique_ptr<ScanScratch> nested;
  ScanScratch* sc = &mine;
  if (mine.busy) {
    nested = std::make_unique<ScanScratch>();
    sc = nested.get();
  }
  sc->busy = true;
  struct Release {
    ScanScratch* sc;
    ~Release() { sc->busy = false; }
  } release{sc};
  OrderedReader& r = sc->reader;
  std::vector<std::pair<std::string, std::string>>& batch = sc->batch;
  ScanSnapshot snap(this, begin, end);
  r.reset(this, end, snap.seq());
  PM_TRY(r.seek(begin));
  for (uint64_t seen = 0;;) {
    const uint64_t want = limit == 0 ? 256 : std::min<uint64_t>(256, limit - seen);
    size_t n = 0;
    const Status read = r.next_batch(want, &batch, &n);
    const bool last = n < want || (limit != 0 && seen + n >= limit) || !read.ok();
    // What fn is given is read: closing the snapshot first spares updates
    // made while fn runs their copies.
    if (last) snap = ScanSnapshot();
    for (size_t i = 0; i < n; i++) {
      if (!fn(batch[i].first, batch[i].second)) return Status();
    }
    PM_TRY(read);  // after the pairs before it, as fn would have met it
    seen += n;
    if (n < want || (limit != 0 && seen >= limit)) return Status();
  }
}

namespace {

class StoreIterator final : public Store::Iterator {
 public:
  StoreIterator(StoreImpl* s, std::string_view end) : s_(s), end_(end) {}

  void seek(std::string_view key) override {
    n_ = 0;
    pos_ = 0;
    done_ = false;
    snap_ = ScanSnapshot();  // the last seek's, closed before the next opens
    after_batch_ = Status();
    status_ = pm::status_of([&] {  // out of DRAM: a status, as for scan()
      snap_ = ScanSnapshot(s_, key, end_);
      r_.reset(s_, end_, snap_.seq());
      return r_.seek(key);
    });
    if (!status_.ok()) snap_ = ScanSnapshot();  // nothing more is read
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
    if (!status_.ok()) return;
    if (done_) {
      status_ = after_batch_;  // an error met after the pairs just visited
      return;
    }
    const Status read = pm::status_of([&] { return r_.next_batch(kBatch, &batch_, &n_); });
    done_ = n_ < kBatch || !read.ok();
    // The pairs read before an error are visited first.
    (n_ == 0 ? status_ : after_batch_) = read;
    // What is left is in batch_: the snapshot is no longer needed (an
    // iterator kept for a later seek must not make updates keep copies).
    if (done_) snap_ = ScanSnapshot();
  }

  StoreImpl* s_;
  std::string end_;
  ScanSnapshot snap_;  // what the reads since the last seek see
  OrderedReader r_;
  std::vector<std::pair<std::string, std::string>> batch_;  // [0, n_) read
  size_t n_ = 0;
  size_t pos_ = 0;
  bool done_ = true;
  Status after_batch_;  // what ended the last read, once batch_ is visited
  Status status_ = Status::invalid_argument("iterator: seek() before reading");
};

}  // namespace

std::unique_ptr<Store::Iterator> StoreImpl::iterator(std::string_view end) {
  return std::make_unique<StoreIterator>(this, std::string(end));
}

}  // namespace kv
