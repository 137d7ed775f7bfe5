#include "kvstore/backend.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "kvstore/frontend.h"  // hash_key
#include "kvstore/planted_bugs.h"

namespace kv {

namespace {

uint32_t key_len(const BackendEntry* e) { return entry_key_len(e); }
bool is_ghost(const BackendEntry* e) { return entry_is_ghost(e); }
std::string_view key_of(const BackendEntry* e) { return entry_key(e); }
BackendEntry* ghost_link(const BackendEntry* e) { return entry_ghost_link(e); }

}  // namespace

Backend::Backend(pm::Container* c, BackendRoot* r) : c_(c), root_(r) {
  count_ = r->count;
  ghosts_ = r->ghosts;
}

Result<std::unique_ptr<Backend>> Backend::create(pm::Container* c, const Geometry& g) {
  Result<void*> mem = c->alloc(sizeof(BackendRoot));
  if (!mem.ok()) return mem.status();
  auto* r = static_cast<BackendRoot*>(*mem);
  c->will_write(r, sizeof *r);
  std::memset(static_cast<void*>(r), 0, sizeof *r);
  r->magic = kBackendMagic;
  r->version = kBackendVersion;
  r->nlogs = g.nlogs;
  r->log_bytes = g.log_bytes;
  r->max_key = g.max_key;
  r->max_value = g.max_value;
  r->seq_high = 1;
  r->flags = kAllEntriesChecksummed | kChainEndsMarked;
  IndexRoot* index = nullptr;
  if (g.ordered) {
    Result<IndexRoot*> made = OrderedIndex::create(c, g.max_key);
    if (!made.ok()) return made.status();
    index = *made;
  }
  r->index = reinterpret_cast<uint64_t>(index);
  Result<void*> seg = c->alloc(kSegBuckets * sizeof(BackendEntry*));
  if (!seg.ok()) return seg.status();
  c->will_write(*seg, kSegBuckets * sizeof(BackendEntry*));
  r->segs[0] = static_cast<BackendEntry**>(*seg);
  for (uint64_t b = 0; b < kSegBuckets; b++) r->segs[0][b] = chain_end(b);
  PM_TRY(c->set_root(r));
  auto b = std::unique_ptr<Backend>(new Backend(c, r));
  if (index != nullptr) {
    Result<std::unique_ptr<OrderedIndex>> idx = OrderedIndex::attach(c, index, g.max_key);
    if (!idx.ok()) return idx.status();
    b->index_ = std::move(*idx);
  }
  return b;
}

Result<std::unique_ptr<Backend>> Backend::attach(pm::Container* c) {
  auto* r = c->root<BackendRoot>();
  if (r == nullptr) return Status::invalid_argument("the container holds no key-value store");
  Result<pm::BlockInfo> b = c->find_block(r);
  if (!b.ok() || b->size < kBackendRootV1Bytes || r->magic != kBackendMagic) {
    return Status::invalid_argument("the container's root is not a key-value store");
  }
  if (r->version < 1 || r->version > kBackendVersion) {
    return Status::not_supported("store format version " + std::to_string(r->version) +
                                 "; this build reads versions 1 to " +
                                 std::to_string(kBackendVersion));
  }
  const size_t need = r->version == 1   ? kBackendRootV1Bytes
                      : r->version == 2 ? kBackendRootV2Bytes
                                        : sizeof(BackendRoot);
  if (b->size < need) return Status::corruption("store root block too small for its version");
  if (r->nlogs == 0 || r->nlogs > kMaxLogs || r->log_bytes == 0 ||
      r->log_bytes > c->raw().size() / r->nlogs || r->level > 14 ||
      r->split >= (kSegBuckets << r->level) || r->max_key == 0 || r->max_key > 65535 ||
      r->max_value > r->log_bytes) {
    return Status::corruption("store root fields out of range (run 'pm check')");
  }
  // Every segment the table uses must be a whole block of the heap.
  const uint64_t buckets = (kSegBuckets << r->level) + r->split;
  for (uint64_t i = 0; i < (buckets + kSegBuckets - 1) / kSegBuckets; i++) {
    const char* seg = reinterpret_cast<const char*>(r->segs[i]);
    if (!c->contains(seg) || !c->contains(seg + kSegBuckets * sizeof(BackendEntry*) - 1) ||
        reinterpret_cast<uintptr_t>(seg) % 8 != 0) {
      return Status::corruption("store root: bucket segment " + std::to_string(i) +
                                " lies outside the heap (run 'pm check')");
    }
  }
  auto be = std::unique_ptr<Backend>(new Backend(c, r));
  if (r->version >= 3 && r->index != 0) {
    // A damaged index root leaves the table readable (pm check, salvage);
    // a store refuses to open on it (index_status()).
    Result<std::unique_ptr<OrderedIndex>> idx =
        OrderedIndex::attach(c, reinterpret_cast<IndexRoot*>(r->index), r->max_key);
    if (idx.ok()) {
      be->index_ = std::move(*idx);
    } else {
      be->index_status_ = idx.status();
    }
  }
  return be;
}

Status Backend::upgrade() {
  if (root_->version < 3) PM_TRY(add_index());
  return mark_chain_ends();
}

Status Backend::mark_chain_ends() {
  for (uint64_t b = 0; b < buckets(); b++) {
    BackendEntry** link = slot(b);
    for (uint64_t n = 0; !is_chain_end(*link); n++) {
      PM_TRY(check_entry(*link));
      if (n > max_chain()) return Status::corruption("store backend: a bucket chain loops");
      link = &(*link)->next;
    }
    if (*link == nullptr) {
      c_->will_write(link, sizeof *link);
      *link = chain_end(b);
    } else if (*link != chain_end(b)) {  // (marked already: a root moved back to version 3)
      return check_end(b, *link);
    }
  }
  set(&root_->flags, root_->flags | kChainEndsMarked);
  set(&root_->version, kBackendVersion);
  return Status();
}

Status Backend::add_index() {
  // Every live key first (the table is as the last commit left it: nothing
  // runs yet), then the new root and its index, in key order.
  std::vector<std::string> keys;
  PM_TRY(scan("", [&](std::string_view k, std::string_view) {
    keys.emplace_back(k);
    return true;
  }));
  std::sort(keys.begin(), keys.end());
  Result<void*> mem = c_->alloc(sizeof(BackendRoot));
  if (!mem.ok()) return mem.status();
  auto* r = static_cast<BackendRoot*>(*mem);
  c_->will_write(r, sizeof *r);
  std::memset(static_cast<void*>(r), 0, sizeof *r);
  std::memcpy(static_cast<void*>(r), root_,
              root_->version == 1 ? kBackendRootV1Bytes : kBackendRootV2Bytes);
  r->version = 3;
  Result<IndexRoot*> index = OrderedIndex::create(c_, r->max_key);
  if (!index.ok()) return index.status();
  r->index = reinterpret_cast<uint64_t>(*index);
  Result<std::unique_ptr<OrderedIndex>> idx = OrderedIndex::attach(c_, *index, r->max_key);
  if (!idx.ok()) return idx.status();
  for (const std::string& k : keys) PM_TRY((*idx)->insert(k));
  PM_TRY(c_->set_root(r));
  PM_TRY(c_->free(root_));
  root_ = r;
  index_ = std::move(*idx);
  return Status();
}

std::string Backend::entry_problem(const BackendEntry* e) const {
  const auto lo = reinterpret_cast<uintptr_t>(c_->base());
  return kv::entry_problem(e, lo, lo + c_->usage().heap_bytes, root_->max_key, root_->max_value);
}

Status Backend::check_entry(const BackendEntry* e) const {
  if (c_->contains(e) && c_->contains(reinterpret_cast<const char*>(e) + sizeof *e - 1)) {
    // The header is readable: now its lengths, against the limits and the heap.
    const uint32_t klen = key_len(e);
    const bool sane = klen != 0 && klen <= root_->max_key &&
                      (is_ghost(e) || e->vlen <= root_->max_value) &&
                      (e->klen & ~(kKeyLenMask | kGhostBit | kSumBit)) == 0 &&
                      c_->contains(reinterpret_cast<const char*>(e) + entry_size(e) - 1);
    if (sane && reinterpret_cast<uintptr_t>(e) % 8 == 0) return Status();
  }
  return Status::corruption("store backend: a damaged entry (at " +
                            std::to_string(reinterpret_cast<uintptr_t>(e)) +
                            "); run 'pm check', then 'pm kv salvage'");
}

Status Backend::check_end(uint64_t b, const BackendEntry* end) const {
  if (end == end_of(b)) return Status();
  if (end == nullptr && g_kv_planted_bugs.zeroed_link_ends_chain) return Status();
  return Status::corruption(
      "store backend: the chain of bucket " + std::to_string(b) + " ends in a damaged link (" +
      (end == nullptr ? std::string("zeroed") : "not its end mark") +
      "): keys after it cannot be read; run 'pm check', then 'pm kv salvage'");
}

Status Backend::check_sum(const BackendEntry* e) const {
  if ((entry_has_sum(e) || !all_checksummed()) && entry_sum_ok(e)) return Status();
  return Status::corruption("store backend: the entry of key '" + std::string(key_of(e)) +
                            "' fails its checksum (damaged); run 'pm check', then 'pm kv salvage'");
}

uint64_t Backend::bucket_of(uint64_t h) const { return bucket_for(*root_, h); }

void Backend::prefetch_for_read(uint64_t h, bool entry) {
  std::shared_lock<std::shared_mutex> s(struct_mu_);  // no split moves the table meanwhile
  if (entry) {
    prefetch_entry<0>(h);
  } else {
    prefetch(h);
  }
}

Result<BackendEntry**> Backend::find_link(uint64_t b, std::string_view key) {
  BackendEntry** link = slot(b);
  for (uint64_t n = 0; !is_chain_end(*link); n++) {
    PM_TRY(check_entry(*link));
    if (key_of(*link) == key) return link;
    if (n > max_chain()) return Status::corruption("store backend: a bucket chain loops");
    link = &(*link)->next;
  }
  PM_TRY(check_end(b, *link));
  // A miss is an answer ("no such key", or a new entry linked here): it
  // must not come from damage to the key's own entry.
  if (*slot(b) != *link) PM_TRY(check_passed_keys(b));
  return link;
}

Status Backend::check_passed_keys(uint64_t b) const {
  for (const BackendEntry* e = *slot(b); !is_chain_end(e); e = e->next) {  // walked just now
    // A key that hashes to another bucket was damaged: the key sought may
    // be it, a byte of its key or of its length changed. (Hashing the key
    // alone keeps a damaged value a failure of its own key's reads, and
    // costs what a key's hash costs, on misses only; a damaged key that
    // still hashes here, one in as many as there are buckets, passes.)
    if (bucket_of(hash_key(key_of(e))) != b) {
      return Status::corruption("store backend: an entry in bucket " + std::to_string(b) +
                                " holds a key that belongs elsewhere (damaged); run 'pm check', "
                                "then 'pm kv salvage'");
    }
  }
  return Status();
}

Result<Backend::Found> Backend::get(std::string_view key, uint64_t h, std::string* value) {
  std::shared_lock<std::shared_mutex> s(struct_mu_);
  const uint64_t b = bucket_of(h);
  std::lock_guard<std::mutex> l(stripe(b));
  Result<BackendEntry**> link = find_link(b, key);
  if (!link.ok()) return link.status();
  Found f;
  const BackendEntry* e = **link;
  if (is_chain_end(e)) return f;
  PM_TRY(check_sum(e));
  f.seq = e->seq;
  f.ghost = is_ghost(e);
  f.present = !f.ghost;
  if (f.present && value != nullptr) value->assign(e->data + key_len(e), e->vlen);
  return f;
}

Status Backend::check_indexed(std::string_view key, uint64_t h) {
  if (index_ == nullptr) return Status();
  std::shared_lock<std::shared_mutex> s(struct_mu_);
  const uint64_t b = bucket_of(h);
  std::lock_guard<std::mutex> l(stripe(b));  // then the index's lock, as apply_* take them
  Result<BackendEntry**> link = find_link(b, key);
  if (!link.ok()) return link.status();
  const BackendEntry* e = **link;
  if (!is_chain_end(e) && !is_ghost(e)) return Status();
  Result<bool> indexed = index_->contains(key);
  if (!indexed.ok()) return indexed.status();
  if (!*indexed) return Status();
  std::string shown;  // the key as the index holds it: damaged, so perhaps not text
  for (char ch : key.substr(0, 64)) shown += (ch >= 32 && ch < 127) ? ch : '?';
  std::string path = c_->usage().path;
  if (!path.empty()) path += ": ";
  return Status::corruption(path + "store index: it holds a key the table does not ('" +
                            shown + (key.size() > 64 ? "...'" : "'") +
                            "): a damaged index; run 'pm check', then 'pm kv salvage'");
}

Result<BackendEntry*> Backend::new_entry(std::string_view key, std::string_view value,
                                         uint64_t seq, bool ghost) {
  const size_t n = entry_bytes(key.size(), ghost ? sizeof(void*) : value.size());
  // A data block: the escaping-pointer check must not read keys and values
  // as pointers. Its links (next, the ghost link) are the backend's own and
  // invisible to collect(): a store is never collected (pm gc refuses it).
  Result<void*> mem = c_->alloc(n, pm::AllocKind::kData);
  if (!mem.ok()) return mem.status();
  auto* e = static_cast<BackendEntry*>(*mem);
  c_->will_write(e, n);
  e->next = nullptr;
  e->seq = seq;
  e->klen = static_cast<uint32_t>(key.size()) | (ghost ? kGhostBit : 0) | kSumBit;
  e->vlen = ghost ? 0 : static_cast<uint32_t>(value.size());
  std::memcpy(e->data, key.data(), key.size());
  if (ghost) {
    std::memset(e->data + key.size(), 0, sizeof(void*));
  } else if (!value.empty()) {
    std::memcpy(e->data + key.size(), value.data(), value.size());
  }
  entry_seal(c_, e);
  return e;
}

void Backend::link_ghost(BackendEntry* e) {
  std::lock_guard<std::mutex> l(ghost_mu_);
  BackendEntry* head = root_->ghost_head;
  std::memcpy(e->data + key_len(e), &head, sizeof head);  // e is new: announced already
  set(&root_->ghost_head, e);
  ghosts_.fetch_add(1, std::memory_order_relaxed);
}

Status Backend::apply_put(std::string_view key, uint64_t h, std::string_view value,
                          uint64_t seq) {
  std::shared_lock<std::shared_mutex> s(struct_mu_);
  const uint64_t b = bucket_of(h);
  std::lock_guard<std::mutex> l(stripe(b));
  Result<BackendEntry**> found = find_link(b, key);
  if (!found.ok()) return found.status();
  BackendEntry** link = *found;
  BackendEntry* old = is_chain_end(*link) ? nullptr : *link;
  if (old != nullptr && old->seq >= seq) return Status();  // a newer update is applied
  if (old != nullptr && !is_ghost(old) && old->vlen == value.size()) {
    // Same size: overwrite in place (one announced range, no allocation).
    c_->will_write(old, sizeof *old + key.size() + value.size());
    old->seq = seq;
    std::memcpy(old->data + key.size(), value.data(), value.size());
    if (entry_has_sum(old)) entry_seal(c_, old);
    return Status();
  }
  Result<BackendEntry*> e = new_entry(key, value, seq, false);
  if (!e.ok()) return e.status();
  if ((old == nullptr || (is_ghost(old) && !g_kv_planted_bugs.index_misses_revived_key)) &&
      index_ != nullptr) {
    // The key becomes live: into the index first, since only the index
    // can fail here (kNoSpace), and then nothing may have changed.
    if (Status s = index_->insert(key); !s.ok()) {
      (void)c_->free(*e);
      return s;
    }
  }
  (*e)->next = old ? old->next : end_of(b);
  c_->will_write(link, sizeof *link);
  *link = *e;
  if (old == nullptr) {
    count_.fetch_add(1, std::memory_order_relaxed);
  } else if (is_ghost(old)) {
    // Detached: the ghost list still holds it; purge frees it (seq 0).
    c_->will_write(&old->seq, sizeof old->seq);
    old->seq = 0;
    if (entry_has_sum(old)) entry_seal(c_, old);
    count_.fetch_add(1, std::memory_order_relaxed);
  } else {
    PM_TRY(c_->free(old));
  }
  return Status();
}

Status Backend::apply_remove(std::string_view key, uint64_t h, uint64_t seq) {
  std::shared_lock<std::shared_mutex> s(struct_mu_);
  const uint64_t b = bucket_of(h);
  std::lock_guard<std::mutex> l(stripe(b));
  Result<BackendEntry**> found = find_link(b, key);
  if (!found.ok()) return found.status();
  BackendEntry** link = *found;
  BackendEntry* old = is_chain_end(*link) ? nullptr : *link;
  if (old != nullptr && old->seq >= seq) return Status();
  // A live key that stops being live leaves the index just before its
  // entry changes: erase never allocates, and fails only on a damaged node,
  // before anything has changed.
  auto unindex = [&] { return index_ != nullptr ? index_->erase(key) : Status(); };
  if (g_kv_planted_bugs.remove_without_ghost) {
    if (old == nullptr || is_ghost(old)) return Status();
    PM_TRY(unindex());
    c_->will_write(link, sizeof *link);
    *link = old->next;
    count_.fetch_sub(1, std::memory_order_relaxed);
    return c_->free(old);
  }
  if (old != nullptr && is_ghost(old)) {
    c_->will_write(&old->seq, sizeof old->seq);
    old->seq = seq;
    if (entry_has_sum(old)) entry_seal(c_, old);
    return Status();
  }
  Result<BackendEntry*> e = new_entry(key, {}, seq, true);
  if (!e.ok() && e.status().code() == pm::Code::kNoSpace && old != nullptr &&
      old->vlen >= sizeof(void*) && entry_has_sum(old)) {
    // No room for a ghost in a full heap: the entry becomes its own ghost,
    // in place (its value's bytes hold the link and the checksum), so that
    // a remove still goes through and its space returns at the purge.
    PM_TRY(unindex());
    c_->will_write(old, entry_bytes(key.size(), sizeof(void*)));
    old->seq = seq;
    old->klen |= kGhostBit;
    old->vlen = 0;
    std::memset(old->data + key.size(), 0, sizeof(void*));
    entry_seal(c_, old);
    link_ghost(old);
    count_.fetch_sub(1, std::memory_order_relaxed);
    // Its value's pages go back now: a ghost newer than a record that waits
    // for room is purged only after that record is applied, so a ghost
    // that kept them would keep that room from it for good (a user trial
    // of the mount: removing files on a full disk freed nothing).
    // Only an optimisation: the remove is applied whatever it says.
    (void)c_->shrink(old, entry_bytes(key.size(), sizeof(void*)));
    return Status();
  }
  if (!e.ok()) return e.status();
  if (old != nullptr) {
    if (Status st = unindex(); !st.ok()) {
      (void)c_->free(*e);
      return st;
    }
  }
  (*e)->next = old ? old->next : end_of(b);
  link_ghost(*e);
  c_->will_write(link, sizeof *link);
  *link = *e;
  if (old != nullptr) {
    count_.fetch_sub(1, std::memory_order_relaxed);
    PM_TRY(c_->free(old));
  }
  return Status();
}

Status Backend::split_as_needed(uint64_t max_splits) {
  std::unique_lock<std::shared_mutex> s(struct_mu_);
  for (uint64_t done = 0; done < max_splits && count() + ghosts() > buckets(); done++) {
    const uint64_t n = kSegBuckets << root_->level;
    if (n * 2 > kSegBuckets * kMaxSegs && root_->split == 0) break;  // at the largest size
    const uint64_t from = root_->split, to = from + n;
    const uint64_t seg = to / kSegBuckets;
    if (root_->segs[seg] == nullptr) {
      Result<void*> m = c_->alloc(kSegBuckets * sizeof(BackendEntry*));
      if (!m.ok()) return m.status();
      c_->will_write(*m, kSegBuckets * sizeof(BackendEntry*));
      std::memset(*m, 0, kSegBuckets * sizeof(BackendEntry*));
      set(&root_->segs[seg], static_cast<BackendEntry**>(*m));
    }
    // Rehash the chain of `from` over `from` and `to`, keeping the order.
    BackendEntry* keep = nullptr;
    BackendEntry* move = nullptr;
    BackendEntry** keep_tail = &keep;
    BackendEntry** move_tail = &move;
    uint64_t walked = 0;
    BackendEntry* e = *slot(from);
    for (; !is_chain_end(e); walked++) {
      PM_TRY(check_entry(e));
      if (walked > max_chain()) return Status::corruption("store backend: a bucket chain loops");
      BackendEntry* next = e->next;
      BackendEntry**& tail = (hash_key(key_of(e)) & (2 * n - 1)) == to ? move_tail : keep_tail;
      c_->will_write(tail, sizeof *tail);
      *tail = e;
      tail = &e->next;
      e = next;
    }
    PM_TRY(check_end(from, e));
    c_->will_write(keep_tail, sizeof *keep_tail);
    *keep_tail = end_of(from);
    c_->will_write(move_tail, sizeof *move_tail);
    *move_tail = end_of(to);
    c_->will_write(slot(from), sizeof(BackendEntry*));
    *slot(from) = keep;
    c_->will_write(slot(to), sizeof(BackendEntry*));
    *slot(to) = move;
    if (from + 1 == n) {
      set(&root_->level, root_->level + 1);
      set(&root_->split, uint64_t{0});
    } else {
      set(&root_->split, from + 1);
    }
  }
  return Status();
}

Status Backend::purge_ghosts(uint64_t min_live_seq,
                             const std::function<bool(std::string_view, uint64_t)>& older_in_logs) {
  std::unique_lock<std::shared_mutex> s(struct_mu_);
  // `link` is where the pointer to the current ghost is stored: the root, or
  // the (unaligned) link after a ghost's key; hence memcpy.
  void* link = &root_->ghost_head;
  // The bound is taken before the walk: every ghost purged lowers ghosts(),
  // and a bound read as we go would call a long healthy list a cycle.
  const uint64_t limit = max_chain();
  for (uint64_t n = 0;; n++) {
    BackendEntry* g;
    std::memcpy(&g, link, sizeof g);
    if (g == nullptr) return Status();
    PM_TRY(check_entry(g));
    if (!is_ghost(g) || n > limit) {
      return Status::corruption("store backend: the ghost list is damaged");
    }
    // On a full disk, what the commit has room for: the rest wait for the
    // next epoch (tens of thousands purged at once outgrew the journal's
    // room, and every epoch after failed).
    if (n % 64 == 63 && !g_kv_planted_bugs.epoch_ignores_journal_room && !c_->commit_fits()) {
      return Status();
    }
    BackendEntry* next = ghost_link(g);
    if (g->seq != 0 && g->seq >= min_live_seq &&
        (!older_in_logs || older_in_logs(key_of(g), g->seq))) {
      link = g->data + key_len(g);
      continue;
    }
    if (g->seq != 0) {  // still in its bucket: unlink it there
      Result<BackendEntry**> bl = find_link(bucket_of(hash_key(key_of(g))), key_of(g));
      if (!bl.ok()) return bl.status();
      if (**bl == g) {
        c_->will_write(*bl, sizeof(BackendEntry*));
        **bl = g->next;
      }
    }
    c_->will_write(link, sizeof next);
    std::memcpy(link, &next, sizeof next);
    PM_TRY(c_->free(g));
    ghosts_.fetch_sub(1, std::memory_order_relaxed);
  }
}

void Backend::store_counters() {
  set(&root_->count, count());
  set(&root_->ghosts, ghosts());
}

Status Backend::scan(std::string_view prefix,
                     const std::function<bool(std::string_view, std::string_view)>& fn) {
  // Splits move entries only into buckets appended past the end, and the
  // bucket an entry had when the scan began (its origin) follows from its
  // hash. So the scan goes origin by origin: for origin o it reads, under
  // one shared lock (no split meanwhile), every bucket that can hold such
  // entries now (those congruent to o modulo the starting size) and reports
  // the entries whose origin is o. Each key present throughout is reported
  // once, at its origin's turn.
  uint64_t n0, split0;
  {
    std::shared_lock<std::shared_mutex> s(struct_mu_);
    n0 = kSegBuckets << root_->level;
    split0 = root_->split;
  }
  auto origin = [&](uint64_t h) {
    uint64_t b = h & (n0 - 1);
    if (b < split0) b = h & (2 * n0 - 1);
    return b;
  };
  std::vector<std::pair<std::string, std::string>> batch;
  for (uint64_t o = 0; o < n0 + split0; o++) {
    batch.clear();
    {
      std::shared_lock<std::shared_mutex> s(struct_mu_);
      for (uint64_t b = o % n0; b < buckets(); b += n0) {
        std::lock_guard<std::mutex> l(stripe(b));
        uint64_t n = 0;
        BackendEntry* e = *slot(b);
        for (; !is_chain_end(e); e = e->next, n++) {
          PM_TRY(check_entry(e));
          if (n > max_chain()) return Status::corruption("store backend: a bucket chain loops");
          if (is_ghost(e) || !key_of(e).starts_with(prefix)) continue;
          if (origin(hash_key(key_of(e))) != o) continue;
          PM_TRY(check_sum(e));
          batch.emplace_back(std::string(key_of(e)), std::string(entry_value(e)));
        }
        PM_TRY(check_end(b, e));
      }
    }
    for (auto& [k, v] : batch) {
      if (!fn(k, v)) return Status();
    }
  }
  return Status();
}

}  // namespace kv
