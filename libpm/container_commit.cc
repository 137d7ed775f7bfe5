// commit() and abort(): the dirty pages diffed into runs, fresh bytes
// written home, the journal written and drained, then written back
// (journal.h holds the rules crash safety rests on).

#include <sys/mman.h>

#include <algorithm>
#include <cstdio>
#include <mutex>
#include <vector>

#include "libpm/container_impl.h"
#include "libpm/sync_point.h"

namespace pm {

namespace {

// Sorts `runs` by offset and merges those that overlap or touch, in place
// (no allocation), so that take_fresh can search them.
void sort_and_merge(std::vector<Run>* runs) {
  std::vector<Run>& v = *runs;
  std::sort(v.begin(), v.end(), [](const Run& a, const Run& b) { return a.off < b.off; });
  size_t n = 0;
  for (size_t i = 0; i < v.size(); i++) {
    if (n > 0 && v[i].off <= v[n - 1].off + v[n - 1].len) {
      v[n - 1].len = std::max(v[n - 1].off + v[n - 1].len, v[i].off + v[i].len) - v[n - 1].off;
    } else {
      v[n++] = v[i];
    }
  }
  v.resize(n);
}

}  // namespace

Status ContainerImpl::commit() {
  PM_TRY(FileLock::check_not_forked(forks_at_open_, path_));
  if (gate_.held_by_this_thread()) {
    return Status::busy("commit() called while this thread holds a MutationGuard");
  }
  ClosedGate closed(gate_);
  if (options_.check_escapes_at_commit) {
    CheckReport r;
    find_escapes(false, &r);
    if (!r.escaping.empty()) {
      const EscapingPointer& e = r.escaping.front();
      char msg[300];
      std::snprintf(msg, sizeof msg,
                    "commit refused: %zu pointer(s) out of the container, first in object "
                    "%#llx at offset %llu -> %#llx (%s); Container::check() lists them all "
                    "(the file has none: nothing was committed)",
                    r.escaping.size(), static_cast<unsigned long long>(e.object),
                    static_cast<unsigned long long>(e.offset),
                    static_cast<unsigned long long>(e.target), e.where.c_str());
      return Status::invalid_argument(msg);
    }
  }
  if (options_.read_only) return usable();
  {
    std::lock_guard<std::mutex> l(persist_mu_);
    if (!failed_.ok() && !g_planted_bugs.mutate_after_failed_writeback) return failed_;
    const uint64_t seq = seq_.load();
    PM_TRY(commit_locked());
    // A commit that wrote a journal may have moved what growth depends on.
    // One that failed (no room for its journal, on the same full disk) or
    // had nothing to write did not: resetting at every attempt made each
    // background epoch of an idle store on a full tmpfs retry two
    // fallocates of megabytes (with the epochs' pace, 40% of a core). The
    // disk's free space is the other signal (above).
    if (seq_.load() != seq) {
      no_room_from_ = 0;
      sample_space(false);
    }
  }
  // Outside persist_mu_ (lock order: heap, then persist); the gate is still
  // closed, so nothing allocates before the freed pages are indexed.
  heap_->committed();
  return Status();
}

// The journal bound against the file's bytes past the heap, which a commit
// on a full disk may use (place_body; commit_locked falls back to the
// heap's end). The slack covers the header, page alignment and the heap
// metadata a commit itself may change.
bool ContainerImpl::commit_fits() {
  sample_space(false);
  const bool refused = short_of_room_.load(std::memory_order_relaxed);
  const uint64_t fs_free = low_space_free_.load(std::memory_order_relaxed);
  if (!refused && fs_free == UINT64_MAX) return true;
  const uint64_t bound = tracker_->dirty_bytes_bound();
  if (bound == 0) return true;
  constexpr uint64_t kSlack = 64 << 10;
  std::lock_guard<std::mutex> l(persist_mu_);
  const uint64_t end = heap_off_ + mapped_.load();
  uint64_t room = persist_->size() > end ? persist_->size() - end : 0;
  // Once the file system refused the file room, the file's own room only.
  if (!refused) room += fs_free;
  return bound + kSlack <= room;
}

void ContainerImpl::sample_space(bool now) {
  const int64_t t = std::chrono::steady_clock::now().time_since_epoch().count();
  int64_t last = space_sampled_.load(std::memory_order_relaxed);
  if (!now) {
    const int64_t every = std::chrono::steady_clock::duration(kSpaceSampleEvery).count();
    if (t - last < every) return;
    // One sampler at a time; the others keep the last sample.
    if (!space_sampled_.compare_exchange_strong(last, t, std::memory_order_relaxed)) return;
  } else {
    space_sampled_.store(t, std::memory_order_relaxed);
  }
  const uint64_t free = persist_->free_bytes();
  low_space_free_.store(free < kLowSpace ? free : UINT64_MAX, std::memory_order_relaxed);
}

Status ContainerImpl::commit_locked() {
  std::vector<PageRun>& pages = dirty_scratch_;
  std::vector<Run>& runs = runs_scratch_;
  pages.clear();
  runs.clear();
  PM_TRY(tracker_->take_dirty(&pages));
  if (pages.empty() && fresh_retry_.empty()) return Status();
  // Out of DRAM before the commit point (diffing, the journal's room): the
  // pages go back to the tracker and nothing is applied, so the commit can
  // be retried; a page list lost here would leave its changes out of every
  // later commit. After it, the commit is durable in the journal.
  bool committed = false;
  // Fresh lines written home (journal.h) by this commit or by one that
  // failed before it: until a commit point names them, the next commit must
  // take them too, since its diff cannot see them (home holds them).
  struct Unnamed {
    std::vector<Run>& retry;
    std::vector<Run> lines;
    const bool& committed;
    ~Unnamed() {
      if (committed || g_planted_bugs.fresh_retry_forgotten) return;
      sort_and_merge(&lines);
      retry.swap(lines);
    }
  } unnamed{fresh_retry_, {}, committed};
  unnamed.lines.swap(fresh_retry_);
  // A commit that fails before its commit point gives its pages back to the
  // tracker; when even that fails, no later commit would hold their
  // changes, so none may commit.
  auto give_back = [&](Status s) {
    if (Status r = tracker_->redirty(pages); !r.ok()) {
      return break_with(r.with_context(s.message() +
                                       "; then tracking its pages again failed (reopen the "
                                       "container, which holds the last commit)"));
    }
    return s;
  };
  try {
    const uint64_t mapped = mapped_.load();
    const std::byte* work = reservation_.base();
    const std::byte* home = persist_->view() + heap_off_;
    // Compare with the file the lines the tracker knows were written (the
    // announced ones), else whole pages.
    std::vector<PageRun>& lines = lines_scratch_;
    tracker_->take_dirty_lines(&lines);
    const uint64_t unit = lines.empty() ? kPage : kLine;
    for (const PageRun& r : lines.empty() ? pages : lines) {
      uint64_t off = r.first * unit;
      if (off >= mapped) break;
      uint64_t len = std::min(r.count * unit, mapped - off);
      diff_lines(work + off, home + off, off, len, &runs);
    }
    runs.insert(runs.end(), unnamed.lines.begin(), unnamed.lines.end());
    if (!runs.empty()) {
      if (g_planted_bugs.home_before_journal) PM_TRY(apply_runs(*persist_, work, runs, heap_off_));
      std::vector<Run>& fresh = fresh_scratch_;
      take_fresh(&runs, &fresh);
      uint64_t body_at = place_body(journal_body_size(runs));
      Status s = grow_journal_room(body_at, runs);
      if (s.code() == Code::kNoSpace && body_at != heap_off_ + mapped &&
          !g_planted_bugs.no_room_fails_commit) {
        // No room above the deferred body (a full disk): finish that commit
        // (write-back drained, header marked applied), after which its body
        // may be overwritten, and use the journal's room at the heap's end.
        // Else a full disk would refuse the commits that free space.
        s = mark_applied();
        body_at = heap_off_ + mapped;
        if (s.ok()) s = grow_journal_room(body_at, runs);
      }
      if (!s.ok() && s.code() != Code::kNoSpace && deferred_) {
        // Growing the file drains first: a failed drain may have lost the
        // deferred write-back (below).
        return break_with(s.with_context(
            "commit failed (nothing applied), and writing the previous commit home may have "
            "failed with it; that commit is durable in the journal: reopen the container to "
            "finish it"));
      }
      bool in_doubt = false, drained = false;
      if (s.ok()) {
        unnamed.lines.reserve(unnamed.lines.size() + fresh.size());
        for (const Run& r : fresh) {
          unnamed.lines.push_back(r);
          persist_->write_flushed(heap_off_ + r.off, work + r.off, r.len);
        }
        s = write_journal(*persist_, seq_.load() + 1, body_at, work, runs, &in_doubt, slots(),
                          deferred_ ? kJournalFollowsDeferred : 0, &journal_stage_,
                          /*body_barrier=*/!fresh.empty());
        drained = true;
      }
      if (in_doubt) {
        return break_with(s.with_context(
            "commit failed and its journal could not be taken back: whether the file holds "
            "this commit is known only after the container is reopened"));
      }
      if (!s.ok() && drained && deferred_) {
        // The failed drain was also the deferred write-back's, and Linux
        // forgets pages whose write-back failed: that commit is now durable
        // only in its journal.
        return break_with(s.with_context(
            "commit failed (nothing applied), and writing the previous commit home may have "
            "failed with it; that commit is durable in the journal: reopen the container to "
            "finish it"));
      }
      if (s.code() == Code::kNoSpace) short_of_room_ = true;
      if (!s.ok()) return give_back(s.with_context("commit (nothing applied; retry)"));
      seq_++;
      committed = true;
      journal_pending_ = true;
      journal_state_ = JournalState::kPending;
      // The commit point's drain made a deferred write-back durable. This one
      // waits in turn off pmem (where a drain is a device flush) in two-slot
      // files; on pmem a drain is a fence, and waiting would save nothing.
      deferred_ = !is_pmem_ && slots() == 2;
      s = apply_runs(*persist_, work, runs, heap_off_, /*drain=*/!deferred_);
      if (!s.ok()) {
        return break_with(s.with_context(
            "commit is durable in the journal but writing it back failed; reopen the "
            "container to finish it"));
      }
      deferred_body_off_ = body_at;
      deferred_body_len_ = journal_body_size(runs);
      journaled_bytes_.fetch_add(deferred_body_len_, std::memory_order_relaxed);
      uint64_t fresh_len = 0;
      for (const Run& r : fresh) fresh_len += r.len;
      fresh_bytes_.fetch_add(fresh_len, std::memory_order_relaxed);
      sort_and_merge(&runs);  // in place: nothing to fail after the commit point
      last_runs_.swap(runs);
    }
  } catch (const std::bad_alloc&) {
    if (committed) {
      return break_with(Status::no_space(
          "commit is durable in the journal but ran out of memory writing it back; reopen the "
          "container to finish it"));
    }
    return give_back(Status::no_space("commit: out of memory (nothing applied; retry)"));
  }
  if (options_.release_after_commit) {
    for (const PageRun& r : pages) {
      ::madvise(reservation_.base() + r.first * kPage, r.count * kPage, MADV_DONTNEED);
    }
  } else {
    try {  // what the DRAM budget may release later: only an optimisation
      remember_committed(pages);
    } catch (const std::bad_alloc&) {
    }
  }
  return Status();
}

Status ContainerImpl::drain_deferred() {
  if (!deferred_) return Status();
  Status s = persist_->drain();
  if (!s.ok()) {
    return break_with(s.with_context(
        "writing the last commit home failed; it is durable in the journal: reopen the "
        "container to finish it"));
  }
  deferred_ = false;
  return Status();
}

uint64_t ContainerImpl::place_body(uint64_t len) const {
  // The body goes past everything mapped, where no heap page lives.
  const uint64_t at = heap_off_ + mapped_.load();
  if (!deferred_ || g_planted_bugs.body_over_deferred_body) return at;
  // The deferred body lies at `at` or above it (the heap grows only after
  // drain_deferred): the new body goes below it when there is room, else
  // right after it. (Never a drain and then `at`: that would overwrite the
  // body of the newest commit while the header before it is pending and
  // sound, and a crash then would replay that older commit alone.) So
  // bodies alternate between `at` and above, and the journal's room stays
  // within about twice the largest body.
  if (at + len <= deferred_body_off_) return at;
  return (deferred_body_off_ + deferred_body_len_ + kPage - 1) & ~(kPage - 1);
}

// Fresh bytes (journal.h): changed lines where the committed heap keeps
// nothing, written home before the commit point. The split costs a barrier
// more (the body's), so off pmem, where a barrier is a device flush, it is
// taken only when it saves the journal at least kFreshMinBytes, or when
// the whole body would not fit the file as it is (on a full disk, where
// the heap has room that removes freed, the journal's room past it may be
// too small for a large new block); on pmem a barrier is a fence. Lines
// the previous commit's journal names stay in this one while its header
// is pending: a recovery that replays it (rule 3) would write its bytes
// over them. Its body lies past the heap and so past every fresh byte
// (growth, the only thing that moves the heap's end, marks it applied
// first), which the check below keeps true.
void ContainerImpl::take_fresh(std::vector<Run>* runs, std::vector<Run>* fresh) {
  constexpr uint64_t kFreshMinBytes = 64 << 10;
  fresh->clear();
  heap_->split_fresh(persist_->view() + heap_off_, persist_->size() - heap_off_, runs, fresh);
  if (journal_pending_) {
    std::vector<Run>& kept = fresh_kept_scratch_;
    std::vector<Run>& still = fresh_still_scratch_;
    kept.clear();
    still.clear();
    const uint64_t body_from = deferred_body_off_ - heap_off_;
    const uint64_t body_to = body_from + deferred_body_len_;
    auto overlap = [](uint64_t a, uint64_t b, uint64_t c, uint64_t d) { return a < d && c < b; };
    for (const Run& f : *fresh) {
      const uint64_t end = f.off + f.len;
      if (overlap(f.off, end, body_from, body_to)) {
        kept.push_back(f);
        continue;
      }
      if (g_planted_bugs.fresh_over_previous_commit) {
        still.push_back(f);
        continue;
      }
      // The last commit's entries that overlap f, cut out of it.
      auto it = std::lower_bound(last_runs_.begin(), last_runs_.end(), f.off,
                                 [](const Run& r, uint64_t off) { return r.off + r.len <= off; });
      uint64_t at = f.off;
      for (; it != last_runs_.end() && it->off < end; ++it) {
        const uint64_t from = std::max(at, it->off), to = std::min(end, it->off + it->len);
        if (from > at) still.push_back({at, from - at});
        kept.push_back({from, to - from});
        at = to;
      }
      if (at < end) still.push_back({at, end - at});
    }
    fresh->swap(still);
    runs->insert(runs->end(), kept.begin(), kept.end());
  }
  uint64_t fresh_len = 0;
  for (const Run& f : *fresh) fresh_len += f.len;
  // Nothing left to journal: the commit still needs a header (fresh bytes
  // alone are a commit only when one names them), so they go in the body.
  auto whole_body_fits = [&] {
    const uint64_t len = journal_body_size(*runs) + journal_body_size(*fresh);
    return place_body(len) + len <= persist_->size();
  };
  if (fresh_len == 0 || runs->empty() ||
      (!is_pmem_ && fresh_len < kFreshMinBytes && whole_body_fits())) {
    runs->insert(runs->end(), fresh->begin(), fresh->end());
    fresh->clear();
  }
}

void ContainerImpl::remember_committed(const std::vector<PageRun>& pages) {
  committed_private_.insert(committed_private_.end(), pages.begin(), pages.end());
  uint64_t added = 0;
  for (const PageRun& r : pages) added += r.count;
  private_pages_.fetch_add(added, std::memory_order_relaxed);
  if (committed_private_.size() < 4096) return;
  // Keep the list short: sort and merge overlapping runs.
  std::sort(committed_private_.begin(), committed_private_.end(),
            [](const PageRun& a, const PageRun& b) { return a.first < b.first; });
  std::vector<PageRun> merged;
  for (const PageRun& r : committed_private_) {
    if (!merged.empty() && r.first <= merged.back().first + merged.back().count) {
      uint64_t end = std::max(merged.back().first + merged.back().count, r.first + r.count);
      merged.back().count = end - merged.back().first;
    } else {
      merged.push_back(r);
    }
  }
  committed_private_.swap(merged);
  uint64_t pages_now = 0;
  for (const PageRun& r : committed_private_) pages_now += r.count;
  private_pages_.store(pages_now, std::memory_order_relaxed);
}

Status ContainerImpl::abort() {
  // Before the gate: a parent thread inside a mutation at fork() never
  // leaves it in the child.
  if (!options_.read_only) PM_TRY(FileLock::check_not_forked(forks_at_open_, path_));
  if (gate_.held_by_this_thread()) {
    return Status::busy("abort() called while this thread holds a MutationGuard");
  }
  // The closed gate excludes growth (which runs inside alloc); abort never
  // touches the file, so it takes no persist_mu_ (lock order: heap, persist).
  ClosedGate closed(gate_);
  // The home view may hold part of a commit: nothing to roll back to.
  if (!options_.read_only) PM_TRY(usable());
  std::vector<PageRun>& pages = dirty_scratch_;
  pages.clear();
  PM_TRY(tracker_->take_dirty(&pages));
  // Read-only tracks nothing: drop every page.
  if (options_.read_only) pages.assign(1, PageRun{0, mapped_.load() / kPage});
  // Dropping a private page makes the working view read the file again,
  // which holds the last committed state.
  for (const PageRun& r : pages) {
    if (::madvise(reservation_.base() + r.first * kPage, r.count * kPage, MADV_DONTNEED) != 0) {
      return Status::from_errno("abort: madvise", errno);
    }
  }
  if (options_.read_only) replay_into_working_view();
  PM_TRY(heap_->reload(mapped_.load()));
  // Fresh bytes a failed commit wrote home stay for the next commit to
  // take (fresh_retry_): the working view now reads them from home, where
  // they are not durable, and a later transaction that writes the same
  // bytes there again (the same block allocated again, the same value: a
  // store that replays its logs after the abort) leaves its diff empty. A
  // crash harness fault run found that durable entry damaged after a power
  // failure. Taking them again writes what home holds: harmless.
  if (g_planted_bugs.abort_forgets_fresh_retry) {
    std::lock_guard<std::mutex> l(persist_mu_);
    fresh_retry_.clear();
  }
  return Status();
}

}  // namespace pm
