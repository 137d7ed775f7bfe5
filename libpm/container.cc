// The container: allocation, growth of the heap and the file, checks and
// reports. Opening is in container_open.cc, commit and abort in
// container_commit.cc; the class is in container_impl.h.

#include <sys/mman.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <vector>

#include "libpm/container_impl.h"
#include "libpm/escape_classifier.h"
#include "libpm/sync_point.h"

namespace pm {

namespace {

// Heap growth keeps at least heap / kJournalReserveShare of file room past
// the heap for the journal (grow_to).
constexpr uint64_t kJournalReserveShare = 64;

// Open containers, for Container::owner_of(). Few entries; a reader lock.
std::shared_mutex g_open_mu;
std::vector<Container*> g_open;

}  // namespace

void ContainerImpl::add_to_open_list() {
  std::unique_lock<std::shared_mutex> l(g_open_mu);
  g_open.push_back(this);
}

ContainerImpl::~ContainerImpl() {
  {
    std::unique_lock<std::shared_mutex> l(g_open_mu);
    g_open.erase(std::remove(g_open.begin(), g_open.end(), this), g_open.end());
  }
  if (persist_ && journal_pending_ && failed_.ok() && FileLock::forks() == forks_at_open_) {
    (void)mark_applied(/*closing=*/true);  // (a fork()ed child leaves the parent's file alone)
  }
  if (persist_ && failed_.ok() && FileLock::forks() == forks_at_open_) rewrite_fresh_retry();
  // The tracker goes before the mapping it watches; the lock goes last.
  tracker_.reset();
  heap_.reset();
  reservation_ = AddressReservation();
  persist_.reset();
}

void ContainerImpl::rewrite_fresh_retry() {
  std::lock_guard<std::mutex> l(persist_mu_);
  if (fresh_retry_.empty() || options_.read_only) return;
  if (g_planted_bugs.close_forgets_fresh_retry) return;
  std::vector<std::byte> copy;
  for (const Run& r : fresh_retry_) {
    // A store of the same bytes dirties the page again (Linux marks a page
    // clean after its write-back failed).
    const std::byte* home = persist_->view() + heap_off_ + r.off;
    copy.assign(home, home + r.len);
    persist_->write_flushed(heap_off_ + r.off, copy.data(), r.len);
  }
  if (persist_->drain().ok()) fresh_retry_.clear();
}

// Called by the heap (its mutex held, the gate entered) to extend the file
// and the working view. Everything past the heap's current end is scratch
// (the journal of an applied commit): mark that journal applied, then cut it
// off so the new heap pages read as zero.
//
// The file keeps as much room past the new end as the journal had: growth
// never takes the journal's room. On a full disk it would otherwise succeed
// by shrinking the journal, and every later commit would fail for want of
// journal room, including the ones that free space (removes).
Status ContainerImpl::grow_to(uint64_t new_heap_size) {
  std::lock_guard<std::mutex> l(persist_mu_);
  // After a failed write-back the journal holds a commit not yet home:
  // marking it applied (below) would lose it.
  if (!failed_.ok() && !g_planted_bugs.mutate_after_failed_writeback) return failed_;
  if (no_room_from_ != 0 && new_heap_size >= no_room_from_ &&
      (g_planted_bugs.growth_waits_for_commit || persist_->free_bytes() <= no_room_free_)) {
    return no_room_;
  }
  const uint64_t heap_end = reinterpret_cast<const HeapHeader*>(reservation_.base())->heap_size;
  uint64_t journal_room = persist_->size() - std::min(persist_->size(), heap_off_ + heap_end);
  // And at least a 64th of the heap. New blocks need no journal room (fresh
  // bytes, journal.h), so the largest commit so far may have left little,
  // and a commit larger than any before finds none on a full disk: the
  // removes of a whole tree of files journal their page map entries (a
  // 1024th of what they free) and the store's buckets (found by a user
  // trial of the mount on a 200 MiB tmpfs: after 30 of 38 files of 5 MB
  // were removed, every epoch failed for want of journal room).
  journal_room = std::max(journal_room, align_up(new_heap_size / kJournalReserveShare, kPage));
  if (g_planted_bugs.growth_takes_journal_room) journal_room = 0;
  if (journal_pending_) PM_TRY(mark_applied());
  {
    std::lock_guard<ViewLock> v(view_mu_);
    // Free space is sampled before the attempt, not after its failure:
    // space freed on the disk in between (another file removed) must count
    // as more than the sample, or growth would wait for a commit that a
    // store whose gleaner waits for room never makes (seen in the full-disk
    // test: free space read after the removal, every retry refused).
    const uint64_t free_before = persist_->free_bytes();
    Status s = persist_->resize(heap_off_ + heap_end, heap_off_ + new_heap_size + journal_room);
    if (s.code() == Code::kNoSpace) {
      sync_point::mark("container.grow.no_room");  // tests free the disk here
      short_of_room_ = true;
      no_room_from_ = new_heap_size;
      no_room_free_ = free_before;
      no_room_ = s;
    }
    PM_TRY(s);
    // The disk had room after all: a later growth may find more (without
    // this, one that used the room freed left the free space at or below
    // the old sample, and a second growth failed at once until a commit
    // was made, which a gleaner blocked on that record never makes).
    no_room_from_ = 0;
    short_of_room_ = false;
    sample_space(true);
  }
  uint64_t mapped = mapped_.load();
  if (new_heap_size > mapped) {
    PM_TRY(
        reservation_.map_private(mapped, new_heap_size - mapped, lock_.map_fd(), heap_off_ + mapped));
    PM_TRY(tracker_->track(reservation_.base(), new_heap_size));
    mapped_ = new_heap_size;
  }
  log(LogLevel::kInfo, "grew heap to " + std::to_string(new_heap_size >> 20) + " MiB");
  return Status();
}

Result<void*> ContainerImpl::alloc(size_t n, AllocKind kind) {
  if (!g_planted_bugs.mutate_after_failed_writeback) PM_TRY(usable());
  MutationGuard g(*this);
  return heap_->alloc(n, kind);
}

Status ContainerImpl::free(void* p) {
  if (p == nullptr) return Status();
  if (!contains(p)) return Status::invalid_argument("free: pointer is not in this container");
  PM_TRY(usable());
  MutationGuard g(*this);
  return heap_->free(p);
}

Status ContainerImpl::shrink(void* p, size_t n) {
  if (!contains(p)) return Status::invalid_argument("shrink: pointer is not in this container");
  PM_TRY(usable());
  MutationGuard g(*this);
  return heap_->shrink(p, n);
}

Result<BlockInfo> ContainerImpl::find_block(const void* p) const {
  if (!contains(p)) return Status::not_found("address is not in this container");
  return heap_->find_block(p);
}

Status ContainerImpl::set_root(void* p, std::string_view name) {
  PM_TRY(usable());
  MutationGuard g(*this);
  return heap_->set_root(p, name);
}

Status ContainerImpl::reserve(uint64_t heap_bytes) {
  if (heap_bytes > sb_.max_size) {
    return Status::no_space("reserve: " + std::to_string(heap_bytes) + " bytes exceeds max_size " +
                            std::to_string(sb_.max_size));
  }
  PM_TRY(usable());
  MutationGuard g(*this);
  return heap_->reserve(align_up(heap_bytes, kPage));
}

bool ContainerImpl::contains(const void* p) const {
  auto* b = static_cast<const std::byte*>(p);
  return b >= reservation_.base() && b < reservation_.base() + mapped_.load();
}

void ContainerImpl::will_write(const void* p, size_t n) {
  // In integers: a range that runs past the end of the address space (any
  // length from a caller) is cut there, where pointer arithmetic would be
  // undefined.
  const uintptr_t b = reinterpret_cast<uintptr_t>(p);
  const uintptr_t lo = reinterpret_cast<uintptr_t>(reservation_.base());
  const uintptr_t hi = lo + mapped_.load();
  const uintptr_t e = n > UINTPTR_MAX - b ? UINTPTR_MAX : b + n;
  if (n == 0 || e <= lo || b >= hi) return;
  const uintptr_t from = std::max(b, lo), to = std::min(e, hi);
  tracker_->will_write(reinterpret_cast<const void*>(from), static_cast<size_t>(to - from));
}

Status ContainerImpl::release_clean() {
  if (gate_.held_by_this_thread()) {
    return Status::busy("release_clean() called while this thread holds a MutationGuard");
  }
  ClosedGate closed(gate_);
  std::vector<PageRun> dirty;
  PM_TRY(tracker_->peek_dirty(&dirty));
  std::vector<bool> is_dirty;
  for (const PageRun& r : dirty) {
    if (is_dirty.size() < r.first + r.count) is_dirty.resize(r.first + r.count);
    for (uint64_t i = 0; i < r.count; i++) is_dirty[r.first + i] = true;
  }
  for (const PageRun& r : committed_private_) {
    uint64_t start = r.first, end = r.first + r.count;
    for (uint64_t p = start; p <= end; p++) {
      bool stop = p == end || (p < is_dirty.size() && is_dirty[p]);
      if (!stop) continue;
      if (p > start)
        ::madvise(reservation_.base() + start * kPage, (p - start) * kPage, MADV_DONTNEED);
      start = p + 1;
    }
  }
  committed_private_.clear();
  private_pages_.store(0, std::memory_order_relaxed);  // the dirty ones count again at their commit
  return Status();
}

Status ContainerImpl::read_committed(const void* p, void* buf, size_t n) const {
  if (options_.read_only) {
    return Status::not_supported("read_committed: " + path_ + " is open read-only");
  }
  // persist_mu_ keeps commits (their write-back), aborts and growth (a
  // remap of the home view) out while the bytes are copied.
  std::lock_guard<std::mutex> l(persist_mu_);
  if (!failed_.ok()) return failed_;
  const uintptr_t b = reinterpret_cast<uintptr_t>(p);
  const uintptr_t lo = reinterpret_cast<uintptr_t>(reservation_.base());
  const uint64_t size = mapped_.load();
  if (b < lo || b - lo > size || n > size - (b - lo)) {
    return Status::invalid_argument("read_committed: the range is not inside the heap of " + path_);
  }
  std::memcpy(buf, persist_->view() + heap_off_ + (b - lo), n);
  return Status();
}

uint64_t ContainerImpl::count_changed(const std::vector<PageRun>& pages) const {
  const uint64_t mapped = mapped_.load();
  const std::byte* work = reservation_.base();
  const std::byte* home = persist_->view() + heap_off_;
  uint64_t n = 0;
  for (const PageRun& r : pages) {
    for (uint64_t p = r.first; p < r.first + r.count && (p + 1) * kPage <= mapped; p++) {
      n += std::memcmp(work + p * kPage, home + p * kPage, kPage) != 0;
    }
  }
  return n;
}

ContainerInfo ContainerImpl::usage() const {
  ContainerInfo i;
  try {  // the names are best effort: usage() does not fail (Store::stats)
    i.path = path_;
    i.tracker = tracker_name(tracker_->kind());
    i.layout = sb_.layout;
  } catch (const std::bad_alloc&) {
  }
  Heap::Stats hs = heap_->stats();
  i.heap_bytes = hs.heap_bytes;
  i.raw_bytes = raw_->size();
  i.max_bytes = sb_.max_size;
  i.used_bytes = hs.used_bytes;
  i.free_bytes = hs.heap_bytes - hs.used_bytes - hs.meta_bytes;
  i.footprint_bytes = hs.heap_bytes - hs.free_page_bytes;
  i.blocks = hs.blocks;
  i.base_address = sb_.base_address;
  i.generation = generation_;
  // No persist_mu_: a commit may hold it for an msync.
  struct stat st;
  if (::fstat(lock_.fd(), &st) == 0) i.file_bytes = static_cast<uint64_t>(st.st_size);
  i.is_pmem = is_pmem_;
  i.journal = journal_state_.load();
  i.commits = seq_.load();
  i.journaled_bytes = journaled_bytes_.load(std::memory_order_relaxed);
  i.fresh_bytes = fresh_bytes_.load(std::memory_order_relaxed);
  i.read_only = options_.read_only;
  i.private_bytes = private_bytes();
  return i;
}

ContainerInfo ContainerImpl::info() const {
  // Counting dirty pages needs the tracker quiet (growth may extend it);
  // from inside a MutationGuard the count is skipped rather than deadlock.
  // Trackers over-report (uffd: pages only read since open; hints: announced
  // but unchanged), so a page counts only if it differs from the home view.
  ContainerInfo i = usage();
  // Set by the open, before anything else could see this container.
  for (const std::string* p : {&superblock_problem_, &copy_problem_}) {
    if (!p->empty()) i.superblock_damage.push_back(*p);
  }
  if (gate_.held_by_this_thread()) return i;
  ClosedGate closed(gate_);
  std::lock_guard<std::mutex> l(persist_mu_);
  std::vector<PageRun> dirty;
  if (tracker_->peek_dirty(&dirty).ok()) i.dirty_pages = count_changed(dirty);
  return i;
}

CheckReport ContainerImpl::check(bool foreign_writer) {
  CheckReport r;
  if (gate_.held_by_this_thread()) {  // closing the gate would wait for this thread
    r.problems.push_back("not checked: check() called while this thread holds a MutationGuard");
    return r;
  }
  ClosedGate closed(gate_);
  // Reported while the superblock is still damaged (a read-only open), and
  // once by the open that rewrote it.
  if (!superblock_problem_.empty()) r.superblock.push_back(superblock_problem_);
  if (!copy_problem_.empty()) r.superblock.push_back(copy_problem_);
  heap_->check(&r.problems);
  Heap::Stats hs = heap_->stats();
  r.blocks = hs.blocks;
  r.used_bytes = hs.used_bytes;
  if (r.problems.empty()) find_escapes(foreign_writer, &r);  // the walk trusts the metadata
  return r;
}

void ContainerImpl::find_escapes(bool foreign_writer, CheckReport* r) const {
  auto lo = reinterpret_cast<uint64_t>(reservation_.base());
  EscapeClassifier classifier(lo, lo + reservation_.size(), foreign_writer);
  heap_->find_escapes([&](uint64_t v) { return classifier.classify(v); }, r);
}

Result<CollectReport> ContainerImpl::collect(bool dry_run) {
  PM_TRY(FileLock::check_not_forked(forks_at_open_, path_));  // before the gate, as abort()
  // The key-value store (kvstore/) frees its own blocks and links some
  // (ghosts, chains of data blocks) where reachability does not look:
  // collecting would free live entries. Refused here, not only by pm gc: a
  // program's pm_collect() on a store's file damaged it (a user trial).
  if (std::string_view(sb_.layout) == Options::kKvStoreLayout) {
    return Status::invalid_argument(path_ + " is a key-value store, which frees its own blocks; "
                                            "collecting would free live entries ('pm kv "
                                            "salvage' compacts a store into a new file)");
  }
  if (gate_.held_by_this_thread()) {
    return Status::busy("collect() called while this thread holds a MutationGuard");
  }
  ClosedGate closed(gate_);
  if (!dry_run) PM_TRY(usable());
  CollectReport r;
  PM_TRY(heap_->collect(dry_run, &r));
  log(LogLevel::kInfo, (dry_run ? "collect (dry run): " : "collect: ") +
                           std::to_string(r.freed_blocks) + " unreachable blocks, " +
                           std::to_string(r.freed_bytes) + " bytes");
  return r;
}

Container* Container::owner_of(const void* p) {
  std::shared_lock<std::shared_mutex> l(g_open_mu);
  for (Container* c : g_open) {
    if (c->contains(p)) return c;
  }
  return nullptr;
}

}  // namespace pm
