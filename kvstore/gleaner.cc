#include "kvstore/gleaner.h"

#include <algorithm>
#include <unordered_set>

#include "kvstore/planted_bugs.h"
#include "libpm/sync_point.h"

namespace kv {

Gleaner::Gleaner(const Env& env) : env_(env), pending_(env.logs->size()) {
  for (uint32_t i = 0; i < env_.logs->size(); i++) cursors_.push_back(std::make_unique<Cursor>());
}

void Gleaner::restore(uint32_t log, uint64_t head) { cursors_[log]->pos = head; }

Status Gleaner::apply(const Op& op, uint64_t h, LogRef ref, uint64_t seq) {
  Reclaimer::Guard g;
  const Item* it = env_.frontend->peek(op.key, h);
  if (it == nullptr || it->lentry.load(std::memory_order_relaxed) != ref) {  // superseded: write collapsing
    env_.counters->add(Counter::kCollapsed);
    return Status();
  }
  if (op.op == OpCode::kRemove) {
    PM_TRY(env_.backend->apply_remove(op.key, h, seq));
    std::lock_guard<std::mutex> l(tomb_mu_);
    tomb_keys_.emplace_back(op.key);
  } else {
    PM_TRY(env_.backend->apply_put(op.key, h, op.value, seq));
  }
  pm::sync_point::point("kv.glean.applied");  // a put may overwrite the item in place here
  if (g_kv_planted_bugs.mark_applied_unchecked) {
    it->applied_epoch.store(committed_epoch_.load() + 1);
  } else {
    it->mark_applied(ref, committed_epoch_.load() + 1);
  }
  env_.counters->add(Counter::kApplied);
  return Status();
}

Result<uint64_t> Gleaner::glean(uint64_t max_records, bool* skipped) {
  PM_TRY(env_.stop->status());
  std::shared_lock<std::shared_mutex> ep(epoch_mu_, std::defer_lock);
  pm::sync_point::acquire(ep, "kv.glean.lock");
  pm::MutationGuard mg(*env_.container);
  uint64_t seen = 0;
  const uint32_t nlogs = env_.logs->size();
  const uint32_t start = next_log_.fetch_add(1);
  std::vector<Record> batch(kBatch);
  std::vector<uint64_t> hashes;
  Status no_space;  // a log whose next record the full backend cannot take
  bool full = false;  // the epoch holds what its commit has room for
  for (uint32_t i = 0; i < nlogs && seen < max_records && !full; i++) {
    const uint32_t n = (start + i) % nlogs;
    LogState* L = env_.logs->at(n);
    Cursor& cur = *cursors_[n];
    std::unique_lock<std::mutex> gl(cur.mu, std::try_to_lock);
    if (!gl.owns_lock()) {
      if (skipped != nullptr) *skipped = true;
      continue;
    }
    uint64_t pos = cur.pos.load(std::memory_order_relaxed);
    const uint64_t tail = L->tail.load(std::memory_order_acquire);
    while (pos < tail && seen < max_records) {
      if (epoch_full()) {
        full = true;
        break;
      }
      // Read a batch; hash and prefetch its keys' buckets, then their items
      // and entries; apply in order.
      int got = 0;
      hashes.clear();
      for (uint64_t at = pos; got < kBatch && at < tail && seen + got < max_records; got++) {
        Record& rec = batch[got];
        pm::sync_point::point("kv.glean.record");
        emulate_delay(env_.emulate_read_ns);
        if (!L->log->read(at, env_.limits, &rec)) {
          return fail(Status::corruption("log " + std::to_string(n) + ": record at " +
                                         std::to_string(at) + " does not validate"));
        }
        for (const Op& op : rec.ops) {
          hashes.push_back(hash_key(op.key));
          Reclaimer::Guard g;  // the frontend's table may be retired meanwhile
          env_.frontend->prefetch(hashes.back());
          env_.backend->prefetch(hashes.back());
        }
        at += rec.header.len;
      }
      {
        // The buckets have had the batch's reads to arrive: now what they
        // point to (the frontend item peek() reads, the backend entry the
        // apply updates), so those misses overlap too.
        Reclaimer::Guard g;
        for (uint64_t h : hashes) {
          env_.frontend->prefetch_item(h);
          env_.backend->prefetch_head(h);
        }
      }
      size_t k = 0;
      uint64_t blocked_end = 0;  // past the record the backend had no room for
      for (int r = 0; r < got && blocked_end == 0 && !full; r++) {
        const Record& rec = batch[r];
        for (size_t i = 0; i < rec.ops.size(); i++) {
          if (full_inside(i)) {
            full = true;  // the rest of the record after this epoch's commit
            break;
          }
          Status s = apply(rec.ops[i], hashes[k++], make_ref(n, pos), rec.header.seq);
          if (s.code() == pm::Code::kNoSpace) {
            no_space = s;
            blocked_end = pos + rec.header.len;
            break;
          }
          if (!s.ok()) return fail(s);
        }
        if (blocked_end != 0 || full) break;
        pos += rec.header.len;
        cur.pos.store(pos, std::memory_order_release);
        seen++;
      }
      if (blocked_end != 0) {
        if (g_kv_planted_bugs.skip_blocked_record) cur.pos.store(blocked_end);
        PM_TRY(apply_beyond(n, L, cur, blocked_end, tail));
        break;  // this log waits for room; the others go on
      }
      if (full) break;
    }
  }
  if (seen == 0 && !no_space.ok()) return no_space;
  return seen;
}

Status Gleaner::apply_beyond(uint32_t n, LogState* L, Cursor& cur, uint64_t pos, uint64_t tail) {
  // Sampled before the pass: what the pass itself frees changes it.
  const pm::HeapCounters now = env_.container->heap_counters();
  const auto t = std::chrono::steady_clock::now();
  const bool same = cur.blocked == pos && cur.room == now && cur.tried_to <= tail &&
                    t - cur.full_pass < kFullPassEvery &&
                    !g_kv_planted_bugs.reread_behind_blocked;
  cur.blocked = pos;
  cur.room = now;
  if (same) {
    pos = std::max(pos, cur.tried_to);
  } else {
    cur.full_pass = t;
  }
  cur.tried_to = tail;
  Record rec;
  for (; pos < tail; pos += rec.header.len) {
    if (epoch_full()) {  // the rest after this epoch's commit
      cur.tried_to = pos;
      break;
    }
    beyond_reads_.fetch_add(1, std::memory_order_relaxed);
    if (!L->log->read(pos, env_.limits, &rec)) {
      return fail(Status::corruption("log " + std::to_string(n) + ": record at " +
                                     std::to_string(pos) + " does not validate"));
    }
    for (size_t i = 0; i < rec.ops.size(); i++) {
      if (full_inside(i)) {
        cur.tried_to = pos;  // this record again, from its start
        return Status();
      }
      const Op& op = rec.ops[i];
      Status s = apply(op, hash_key(op.key), make_ref(n, pos), rec.header.seq);
      if (!s.ok() && s.code() != pm::Code::kNoSpace) return fail(s);
    }
  }
  return Status();
}

uint64_t Gleaner::oldest_live_seq() const {
  uint64_t oldest = env_.next_seq->load();
  for (uint32_t i = 0; i < env_.logs->size(); i++) {
    const uint64_t pos = cursors_[i]->pos.load();
    uint64_t seq;
    LogState* L = env_.logs->at(i);
    if (pos < L->tail.load(std::memory_order_acquire) && L->log->peek_seq(pos, &seq)) {
      oldest = std::min(oldest, seq);
    }
  }
  return oldest;
}

bool Gleaner::waiting_for_room() const {
  for (const auto& c : cursors_) {
    if (c->blocked > c->pos.load(std::memory_order_relaxed)) return true;
  }
  return false;
}

Result<Gleaner::SeqByKey> Gleaner::oldest_seq_by_key() const {
  SeqByKey out;
  Record rec;
  for (uint32_t i = 0; i < env_.logs->size(); i++) {
    LogState* L = env_.logs->at(i);
    const uint64_t tail = L->tail.load(std::memory_order_acquire);
    for (uint64_t pos = cursors_[i]->pos.load(); pos < tail; pos += rec.header.len) {
      if (!L->log->read(pos, env_.limits, &rec)) {
        return Status::corruption("log " + std::to_string(i) + ": record at " +
                                  std::to_string(pos) + " does not validate");
      }
      for (const Op& op : rec.ops) out.emplace_back(hash_key(op.key), rec.header.seq);
    }
  }
  std::sort(out.begin(), out.end());  // by hash, then oldest first
  out.erase(std::unique(out.begin(), out.end(),
                        [](const auto& a, const auto& b) { return a.first == b.first; }),
            out.end());
  return out;
}

Status Gleaner::purge_ghosts() {
  const uint64_t live = oldest_live_seq();
  if (env_.backend->ghosts() == 0 || !waiting_for_room()) return env_.backend->purge_ghosts(live);
  // A log that waits for room holds oldest_live_seq() back, and with it
  // every ghost newer than its blocked record: removes of small values
  // (ghosts in place) freed nothing while the puts behind them waited, the
  // logs' reserve for removes ran out, and then not even a remove went
  // through (a user trial wedged a full store of 100-byte values so). A
  // ghost only keeps an older record of its key from bringing the key back
  // (applied, or replayed after a crash); so while a log waits, a ghost
  // whose key has none left goes too. Records logged meanwhile are newer
  // than every ghost of their key: a key's records are logged in sequence
  // order (StoreImpl::update).
  Result<SeqByKey> left = oldest_seq_by_key();
  if (!left.ok()) return fail(left.status());
  return env_.backend->purge_ghosts(live, [&](std::string_view key, uint64_t seq) {
    if (g_kv_planted_bugs.purge_ignores_records_left) return false;
    const uint64_t h = hash_key(key);
    auto it = std::lower_bound(left->begin(), left->end(), std::make_pair(h, uint64_t{0}));
    return it != left->end() && it->first == h && it->second < seq;
  });
}

Status Gleaner::advance_epoch() {
  PM_TRY(env_.stop->status());
  std::vector<std::string> tombs;
  pm::sync_point::point("kv.epoch.begin");
  {
    std::unique_lock<std::shared_mutex> ep(epoch_mu_, std::defer_lock);
    pm::sync_point::acquire(ep, "kv.epoch.lock");
    bool moved = false;
    for (uint32_t i = 0; i < env_.logs->size(); i++) {
      moved |= cursors_[i]->pos.load() != env_.logs->at(i)->head.load();
    }
    if (!moved && env_.backend->ghosts() == 0 && !commit_wanted_.load()) return Status();
    // The invariant (gleaner.h): every record a collapse skipped for a newer
    // one is passed only once that newer one is durable.
    if (!g_kv_planted_bugs.epoch_skips_log_sync) PM_TRY(env_.logs->sync());
    Status s;
    {
      pm::MutationGuard mg(*env_.container);  // info() and check() read the heap meanwhile
      s = env_.backend->split_as_needed(1 << 16);
      // A full heap leaves the table as loaded as it is (a split that finds
      // no room for a segment changes nothing).
      if (s.code() == pm::Code::kNoSpace) s = Status();
      if (s.ok()) s = purge_ghosts();
      if (s.ok()) {
        env_.backend->store_counters();
        BackendRoot* r = env_.backend->root();
        for (uint32_t i = 0; i < env_.logs->size(); i++) {
          uint64_t head = cursors_[i]->pos.load();
          if (g_kv_planted_bugs.reclaim_unapplied) head = env_.logs->at(i)->tail.load();
          env_.backend->set(&r->heads[i], head);
        }
        env_.backend->set(&r->seq_high, env_.next_seq->load());
      }
    }
    if (s.ok()) {
      s = env_.container->commit();
      emulate_delay(2 * env_.emulate_persist_ns);  // its two barriers
      // A commit that found no room for its journal applied nothing and
      // keeps the epoch's changes: a later one retries them.
      if (s.code() == pm::Code::kNoSpace) return s;
    }
    if (!s.ok()) return fail(s);
    commit_wanted_.store(false);
    // Without this the working view's private copies of the pages written
    // would grow with everything the store ever wrote (a 2.2 GiB file
    // through the mount held 2.7 GB). Here, no gleaner holds a mutation
    // guard. A failed release only leaves the DRAM held: not an error.
    const uint64_t budget = env_.private_budget;
    if (budget != 0 && env_.container->private_bytes() > budget) {
      (void)env_.container->release_clean();
    }
    // Durable: the gleaned log space is free, the applied items are clean.
    for (uint32_t i = 0; i < env_.logs->size(); i++) {
      env_.logs->release(env_.logs->at(i), cursors_[i]->pos.load());
      pending_.forget(i, cursors_[i]->pos.load());
    }
    committed_epoch_.fetch_add(1, std::memory_order_acq_rel);
    env_.counters->add(Counter::kEpochs);
    std::lock_guard<std::mutex> l(tomb_mu_);
    tombs.swap(tomb_keys_);
  }
  drop_applied_tombstones(tombs);
  return Status();
}

// A removed key leaves the frontend once the backend's removal is committed.
void Gleaner::drop_applied_tombstones(std::vector<std::string>& keys) {
  for (const std::string& k : keys) {
    const uint64_t h = hash_key(k);
    Frontend::Locked lk(env_.frontend, h);
    Item* it = lk.find(k, h);
    if (it != nullptr && it->tombstone && clean(*it)) lk.erase(it);
  }
}

Status Gleaner::checkpoint() {
  std::vector<uint64_t> target;
  for (uint32_t i = 0; i < env_.logs->size(); i++) {
    target.push_back(env_.logs->at(i)->tail.load(std::memory_order_acquire));
  }
  // Where the last glean met a record the full backend had no room for.
  uint64_t stuck_at = UINT64_MAX;
  pm::HeapCounters stuck_heap{};
  for (;;) {
    Result<uint64_t> g = glean(UINT64_MAX);
    if (!g.ok() && g.status().code() != pm::Code::kNoSpace) return g.status();
    bool done = true;
    uint64_t at = 0;
    for (size_t i = 0; i < target.size(); i++) {
      done &= cursors_[i]->pos.load() >= target[i];
      at += cursors_[i]->pos.load();
    }
    if (done) break;
    if (!g.ok()) {
      // The removes applied behind that record may make its room, at once
      // or once committed: commit them and glean again, for as long as
      // that moves a cursor or changes the heap.
      const pm::HeapCounters heap = env_.container->heap_counters();
      if (at == stuck_at && heap == stuck_heap) return g.status();
      stuck_at = at;
      stuck_heap = heap;
      PM_TRY(advance_epoch());
      continue;
    }
    if (epoch_full()) {
      const uint64_t before = committed_epoch_.load();
      PM_TRY(advance_epoch());
      if (committed_epoch_.load() == before && epoch_full()) {
        return Status::no_space(
            "store: the epoch's changes need more journal room than the file system leaves the "
            "store file; free space on its file system");
      }
      continue;
    }
    pm::sync_point::spin("kv.checkpoint.wait");  // another gleaner holds a log: wait for it
  }
  return advance_epoch();
}

bool Gleaner::behind() const {
  for (uint32_t i = 0; i < env_.logs->size(); i++) {
    if (cursors_[i]->pos.load() < env_.logs->at(i)->tail.load(std::memory_order_acquire)) {
      return true;
    }
  }
  return false;
}

uint64_t Gleaner::live_keys() {
  std::vector<std::unique_lock<std::mutex>> held;
  for (auto& c : cursors_) held.emplace_back(c->mu);
  const uint64_t backend_keys = env_.backend->count();
  std::unordered_set<std::string> keys;
  Record rec;
  for (uint32_t i = 0; i < env_.logs->size(); i++) {
    LogState* L = env_.logs->at(i);
    const uint64_t tail = L->tail.load(std::memory_order_acquire);
    for (uint64_t pos = cursors_[i]->pos.load(); pos < tail; pos += rec.header.len) {
      if (!L->log->read(pos, env_.limits, &rec)) break;
      for (const Op& op : rec.ops) keys.emplace(op.key);
    }
  }
  int64_t delta = 0;
  for (const std::string& k : keys) {
    const uint64_t h = hash_key(k);
    bool applied = true, live = false;
    {
      Reclaimer::Guard g;
      env_.frontend->read(k, h, [&](const Item& it) {
        applied = it.applied_epoch.load(std::memory_order_acquire) != 0;
        live = !it.tombstone;
      });
    }
    if (applied) continue;  // the backend's count has it already
    Result<Backend::Found> f = env_.backend->get(k, h, nullptr);
    const bool in_backend = f.ok() && f->present;
    delta += static_cast<int64_t>(live) - static_cast<int64_t>(in_backend);
  }
  return static_cast<uint64_t>(std::max<int64_t>(static_cast<int64_t>(backend_keys) + delta, 0));
}

Status Gleaner::read_pending_locked() {
  for (uint32_t i = 0; i < env_.logs->size(); i++) {
    LogState* L = env_.logs->at(i);
    // The cursor first: whatever it passes after this is in the backend
    // (and its index) by the time the reader looks there.
    const uint64_t pos = cursors_[i]->pos.load(std::memory_order_acquire);
    const uint64_t tail = L->tail.load(std::memory_order_acquire);
    PM_TRY(pending_.update(i, *L->log, env_.limits, pos, tail));
  }
  return Status();
}

void Gleaner::trust_index_flags() {
  for (uint32_t i = 0; i < env_.logs->size(); i++) {
    pending_.trust_flags_from(i, env_.logs->at(i)->tail.load(std::memory_order_acquire));
  }
}

Status Gleaner::read_pending() {
  std::shared_lock<std::shared_mutex> ep(epoch_mu_);
  return read_pending_locked();
}

Status Gleaner::pending_keys(std::string_view after, bool inclusive, std::string_view end,
                             size_t max, std::vector<std::string>* out, bool* more) {
  out->clear();
  std::shared_lock<std::shared_mutex> ep(epoch_mu_);
  PM_TRY(read_pending_locked());
  *more = pending_.collect(after, inclusive, end, max, out);
  return Status();
}

}  // namespace kv
