// DirtyTracker: which pages of the working view were written since the last
// commit. Three implementations behind one interface (see pm::TrackerKind):
// userfaultfd async write-protect with PAGEMAP_SCAN, mprotect with a SIGSEGV
// handler, and explicit will_write() hints.
//
// Thread safety: will_write() and the faults it stands for may come from any
// thread. take_dirty(), peek_dirty() and track() are called with the commit
// gate held exclusively (no concurrent writers).
#ifndef LIBPM_TRACKER_H_
#define LIBPM_TRACKER_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "pm/options.h"
#include "pm/status.h"

namespace pm {

// Pages [first, first+count), numbered from the start of the tracked region.
struct PageRun {
  uint64_t first;
  uint64_t count;
};

class DirtyTracker {
 public:
  virtual ~DirtyTracker() = default;
  virtual TrackerKind kind() const = 0;

  // Extends tracking to [region_begin + tracked_len, region_begin + new_len);
  // those pages start clean. The first call sets the region. The pages must
  // be mapped readable and writable before the call.
  virtual Status track(std::byte* region_begin, uint64_t new_len) = 0;

  // Appends the dirty pages since the last take_dirty() in ascending order and
  // marks them clean again (re-armed).
  virtual Status take_dirty(std::vector<PageRun>* out) = 0;

  // Appends the dirty pages without re-arming.
  virtual Status peek_dirty(std::vector<PageRun>* out) = 0;

  // The 64-byte lines of the pages that the last take_dirty() returned,
  // as ascending runs of line numbers (64 per page), for a tracker that
  // knows them: kHints, whose lines are the announced bytes. A commit then
  // compares only those lines with the file, not whole pages (a store's
  // epoch announces a few lines per page). Replaces `out`'s contents (a
  // swap: no copy per commit); trackers that know pages only leave it empty.
  virtual void take_dirty_lines(std::vector<PageRun>* out) { out->clear(); }

  virtual void will_write(const void* p, size_t n) = 0;

  // At least the journal a commit of what is dirty now would write (each
  // changed run's data and entry header): whole pages here, the announced
  // lines under kHints. 0 when it cannot tell. Not free: a walk of the
  // dirty pages.
  virtual uint64_t dirty_bytes_bound() {
    std::vector<PageRun> pages;
    if (!peek_dirty(&pages).ok()) return 0;
    uint64_t n = 0;
    for (const PageRun& r : pages) n += r.count;
    return n * (4096 + 16);
  }

  // Marks runs dirty again after a take_dirty() whose commit failed, so that
  // the next commit still sees them.
  virtual Status redirty(const std::vector<PageRun>& runs) = 0;
};

// The tracker for `kind` (kAuto resolved from PM_TRACKER, then availability).
// `why` receives a sentence for the log saying what was chosen and why.
// `uffd_chunks_above`: Options::uffd_chunk_mode_above.
Result<std::unique_ptr<DirtyTracker>> make_tracker(TrackerKind kind, uint64_t max_len,
                                                   uint64_t uffd_chunks_above, std::string* why);

// Implementations (tracker_uffd.cc, tracker_mprotect.cc).
Result<std::unique_ptr<DirtyTracker>> make_uffd_tracker(uint64_t max_len,
                                                        uint64_t chunks_above);
std::unique_ptr<DirtyTracker> make_mprotect_tracker(uint64_t max_len);
std::unique_ptr<DirtyTracker> make_hints_tracker(uint64_t max_len);

}  // namespace pm

#endif  // LIBPM_TRACKER_H_
