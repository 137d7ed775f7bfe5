// pm::Options: how a container is created and opened.
#ifndef PM_OPTIONS_H_
#define PM_OPTIONS_H_

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "pm/status.h"

namespace pm {

class Container;

// How the library learns which pages of the working view changed.
// Frozen: the names are accepted by PM_TRACKER and `pm --tracker`.
enum class TrackerKind : int {
  kAuto = 0,      // PM_TRACKER if set, else uffd where the kernel has it, else mprotect
  kUffd = 1,      // userfaultfd async write-protect + PAGEMAP_SCAN (Linux 6.7+)
  kMprotect = 2,  // mprotect + SIGSEGV: works everywhere, ~10 us per first write
  kHints = 3,     // only ranges announced with will_write(): no faults at all
};

// "auto", "uffd", "mprotect", "hints".
const char* tracker_name(TrackerKind kind);
// Parses a tracker name; false when unknown.
bool parse_tracker(std::string_view name, TrackerKind* kind);

enum class LogLevel : int { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3 };

// Receives open/recovery summaries, the tracker chosen and why, growth.
// Called from the thread doing the work; must not call back into the container.
using Logger = std::function<void(LogLevel, std::string_view)>;

struct Options {
  // --- used by create (and by open with create_if_missing) ---

  // Heap bytes available right after create. The file is this plus 4 KiB
  // (plus raw_bytes), and past the heap's end the journal of the largest
  // commit so far (rounded up to 1 MiB; kept as scratch): a disk needs
  // room for the heap plus the largest commit. Default 64 MiB. The
  // container grows by itself when the heap runs out.
  uint64_t initial_size = 64ull << 20;

  // Size of the raw region (see pm/raw_region.h), rounded up to 4 KiB;
  // fixed at create. Default 0: none. At most 16 GiB.
  uint64_t raw_bytes = 0;

  // Address space reserved for the heap: the container can grow up to this.
  // Costs no memory (PROT_NONE reservation), only virtual addresses.
  // Default 64 GiB; a multiple of 1 GiB.
  uint64_t max_size = 64ull << 30;

  // Address of the working view, recorded in the file so that raw pointers
  // survive reopening. 0 (default) picks a free 1 GiB-aligned address far from
  // where the kernel places ordinary mappings.
  uint64_t base_address = 0;

  // Identity of the program's data layout (at most 31 bytes), stored at create
  // and compared at open when non-empty: one program's file is never read as
  // another's. Default empty (not checked).
  std::string layout;
  // The key-value store's layout (kvstore/): it frees its own blocks, so
  // Container::collect() refuses its files.
  static constexpr char kKvStoreLayout[] = "kvstore";

  // Permission bits of a new container file, as open(2)'s mode: the
  // process's umask applies. Default 0600: a container holds a program's
  // heap, which is nobody else's to read. Must include 0600, at most 0777.
  uint32_t file_mode = 0600;

  // Runs on a new container before it appears at its path (roots, first
  // objects); its changes are committed with the creation. A create is
  // atomic: the file is built under a temporary name beside the path
  // (".<name>.creating") and renamed once durable, so a crash leaves either
  // nothing at the path or the whole initialized container; the next create
  // of that path takes over a temporary left behind. Default: none.
  std::function<Status(Container&)> initialize;

  // --- used by open ---

  // open() creates the container when the file does not exist.
  bool create_if_missing = false;

  // Opens for reading only: the file is opened O_RDONLY under a shared lock
  // (any number of readers, no writer meanwhile), so a user who may not
  // write it can read it. The working view is a private copy: stores into it
  // are allowed but never reach the file, and commit(), alloc(), free(),
  // set_root(), reserve() and collect() fail with kReadOnly; abort() drops
  // the stores. A commit the last session left unfinished in the file (it
  // died, or had not closed) is applied in this process's copies only; a
  // writable open finishes it in the file. Implies the hints tracker
  // (nothing is tracked). Default off.
  bool read_only = false;

  // Dirty tracker; kAuto lets PM_TRACKER (uffd|mprotect|hints) decide.
  TrackerKind tracker = TrackerKind::kAuto;

  // After each commit, drop the private copies of the committed pages so that
  // DRAM held by the working view stays bounded by one transaction's writes.
  // Costs a page fault on the next write to each such page. Default off.
  bool release_after_commit = false;

  // kUffd only. From this many mapped heap bytes on, the tracker also
  // write-protects 64 KiB chunks (mprotect) so that a commit scans only the
  // chunks written since the last one: a small commit then costs about
  // 15-20 us at any size, where a full scan costs about 0.8 us per populated
  // MiB (115 us at 256 MiB, 810 us at 1 GiB; docs/impl.md). The price: a
  // system call that writes into an untouched chunk (read(2) into an
  // object) fails with EFAULT unless the range was announced with
  // will_write() first. Default 0: never, so system calls always work.
  uint64_t uffd_chunk_mode_above = 0;

  // Debug aid: every commit() first looks for escaping pointers (see
  // Container::check) and fails with kInvalidArgument, naming them, instead
  // of committing. Costs a walk of the reachable heap per commit.
  bool check_escapes_at_commit = false;

  // Default: drop messages.
  Logger logger;
};

}  // namespace pm

#endif  // PM_OPTIONS_H_
