// pm::Container: a file mapped into the address space, with a heap, roots,
// and one-call atomic, durable commit().
//
// Model. The application reads and writes container memory with ordinary loads
// and stores on a private working view. commit() makes every change since the
// last commit durable and atomic (all or nothing across a crash); abort()
// drops them. close() without commit() discards uncommitted changes, as a
// crash would. Raw pointers between objects stay valid across reopening: the
// working view is always mapped at the address recorded in the file.
//
// Thread safety. Every method may be called from any thread. commit() and
// abort() need a moment when no thread is mutating: a thread that writes
// container memory while other threads may commit holds a MutationGuard for
// the duration of the writes that belong together. alloc(), free(), set_root()
// take the guard themselves.
//
// Trackers. With TrackerKind::kHints only ranges announced through
// will_write() are committed (the 64-byte lines that hold them; a commit
// compares only those with the file, so it costs what was announced, not
// the pages around it). With kMprotect a system call that writes into
// container memory (read(2) into an object) fails with EFAULT unless the range
// was announced with will_write() first. kUffd (what kAuto picks where the
// kernel has userfaultfd's asynchronous write-protect, Linux 6.7+) has no
// such limit, unless Options::uffd_chunk_mode_above is set.
#ifndef PM_CONTAINER_H_
#define PM_CONTAINER_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "pm/options.h"
#include "pm/raw_region.h"
#include "pm/status.h"

namespace pm {

// State of the redo journal as found in the file.
enum class JournalState : int {
  kEmpty = 0,    // no commit yet, or header unreadable (a torn, unacknowledged commit)
  kApplied = 1,  // last commit fully applied to the home view
  kPending = 2,  // a durable commit that open() will replay (crash after commit)
  kTorn = 3,     // a commit that never completed (crash during commit); ignored
};

// "empty", "clean", "pending replay", "torn (ignored)".
const char* journal_state_name(JournalState s);

// A word in a reachable object that points out of the container into
// volatile memory: the most common porting bug (a pointer to the DRAM heap
// or the stack stored in a persistent object).
struct EscapingPointer {
  uint64_t object = 0;  // address of the object holding the word
  uint64_t offset = 0;  // byte offset of the word in the object
  uint64_t target = 0;  // the value
  std::string where;    // what the target is: "[heap]", "[stack]", a file, or "volatile range"
};

// What check() found; empty `problems` and `escaping` mean consistent.
struct CheckReport {
  // The superblock or its copy found damaged (and what an open did about
  // it). The heap is checked all the same: the other one was sound.
  std::vector<std::string> superblock;
  std::vector<std::string> problems;
  std::vector<EscapingPointer> escaping;
  uint64_t blocks = 0;
  uint64_t used_bytes = 0;
  uint64_t reachable_blocks = 0;
};

// What collect() found (or, on a dry run, would free).
struct CollectReport {
  uint64_t live_blocks = 0, live_bytes = 0;
  uint64_t freed_blocks = 0, freed_bytes = 0;
  // Unreachable blocks by size: (upper bound, a power of two; count).
  std::vector<std::pair<uint64_t, uint64_t>> freed_by_size;
};

// The heap's counters that change whenever room may appear in it
// (Container::heap_counters): an allocation that failed for want of room,
// retried while they are all unchanged, fails again, unless the file can
// now grow (space freed on the disk), which a retry of that allocation
// finds out.
struct HeapCounters {
  uint64_t heap_bytes = 0;  // the heap's size
  uint64_t used_bytes = 0;  // bytes in allocated blocks
  uint64_t blocks = 0;      // allocated blocks
  uint64_t released = 0;    // commits that made freed pages allocatable again
  bool operator==(const HeapCounters&) const = default;
};

struct ContainerInfo {
  std::string path;
  uint64_t file_bytes = 0;       // size of the file
  uint64_t heap_bytes = 0;       // heap size (grows on demand)
  uint64_t raw_bytes = 0;        // raw region (Options::raw_bytes)
  uint64_t max_bytes = 0;        // largest heap size this container may reach
  uint64_t used_bytes = 0;       // bytes in allocated blocks (including size rounding)
  uint64_t free_bytes = 0;       // heap_bytes - used_bytes - allocator metadata
  uint64_t footprint_bytes = 0;  // heap pages not free: blocks, partly used pages, metadata
  uint64_t blocks = 0;           // allocated blocks
  uint64_t dirty_pages = 0;      // pages written since the last commit
  // DRAM held by the working view's private copies of committed pages (an
  // upper bound; release_clean() returns it). 0 with release_after_commit.
  uint64_t private_bytes = 0;
  uint64_t base_address = 0;     // where the working view is mapped
  uint64_t commits = 0;          // journal sequence number of the last commit
  // Since open: bytes of journal bodies written by commits, and changed
  // bytes in space the committed heap did not use (new blocks), which
  // commits write home once instead of through the journal.
  uint64_t journaled_bytes = 0;
  uint64_t fresh_bytes = 0;
  uint64_t generation = 0;       // see Container::generation()
  bool is_pmem = false;          // home view is persistent memory (or forced)
  bool read_only = false;        // opened with Options::read_only
  std::string tracker;           // tracker in use
  std::string layout;
  JournalState journal = JournalState::kEmpty;
  // What this open found damaged in the superblock or its copy, and did:
  // read the other, and (opened writable) rewrote the damaged one from it.
  // check() reports the same; the next open finds nothing. info() only.
  std::vector<std::string> superblock_damage;
};

// What a block may hold, chosen at alloc() and kept with the block (in the
// file: it survives reopen; commit() and abort() cover it like the
// allocation itself).
//
// collect() and check() are conservative: every aligned 8-byte word of a
// reachable object block is read as a possible pointer, so bytes that
// merely look like an address (a value ending in "abcdeU", a length pair)
// keep garbage alive or are reported as escaping pointers. A data block is
// never read that way, as conservative collectors treat pointer-free
// ("atomic") objects: collect() keeps it while something reaches it but
// follows nothing in it, and check() does not scan it. So a data block
// must hold no pointer that keeps another block alive: values, strings,
// raw bytes.
enum class AllocKind : uint8_t {
  kObject = 0,  // may hold pointers (the default)
  kData = 1,    // pointer-free
};

// A block of the heap: what "which block contains this address" answers.
struct BlockInfo {
  void* start = nullptr;
  size_t size = 0;  // usable bytes (rounded to granules, the size class, or the page run)
  AllocKind kind = AllocKind::kObject;
};

class Container {
 public:
  // Creates a new container file (Options::file_mode, 0600 by default).
  // kNotFound when its directory is missing, kReadOnly when it may not be
  // written. Fails with kInvalidArgument if
  // `path` exists or an option is out of range, kBusy if the address range is
  // in use in this process, kIOError/kNoSpace from the file system.
  static Result<std::unique_ptr<Container>> create(const std::string& path,
                                                   const Options& options = Options());

  // Opens an existing container, replaying a committed but unapplied journal.
  // kNotFound: no file (unless create_if_missing); kBusy: locked by another
  // process (the message names it) or the address is taken in this process;
  // kCorruption: not a container, truncated, or damaged (the message says
  // which); kNotSupported: written by another format version;
  // kInvalidArgument: layout mismatch.
  static Result<std::unique_ptr<Container>> open(const std::string& path,
                                                 const Options& options = Options());

  // Deletes a container file. kBusy if it is open; kInvalidArgument if the
  // file is not a container (it is left alone).
  static Status remove(const std::string& path);

  // The open container whose mapped heap contains p, or nullptr. Lets code
  // that holds only a pointer into a container (an allocator stored inside
  // it, say) find the container. The result is valid while it stays open.
  static Container* owner_of(const void* p);

  // Closes: uncommitted changes are discarded. Every pointer into the
  // container becomes invalid.
  virtual ~Container() = default;

  Container(const Container&) = delete;
  Container& operator=(const Container&) = delete;

  // Makes all changes since the last commit durable and atomic. On error
  // (kIOError, kNoSpace) before the commit point nothing of this commit is
  // applied and the changes stay in the working view, so commit() may be
  // retried. If writing the changes home fails after the commit point, the
  // commit is durable in the journal but the container is broken: this and
  // every later call that would change it (commit, abort, alloc, free,
  // set_root, reserve, collect) fails with that error until the container is
  // reopened, which finishes the commit. Off pmem a commit's write-back is
  // made durable by the next commit's flush (one device flush per commit):
  // when that flush fails, the next commit fails and the container is
  // broken in the same way, since the write-back may be what failed.
  // kBusy if the calling thread holds a MutationGuard (that would deadlock).
  virtual Status commit() = 0;

  // Drops every change since the last commit, including allocations and
  // frees. Pointers to objects allocated since then become invalid.
  virtual Status abort() = 0;

  // Allocates n bytes, growing the container when needed: page-aligned
  // above 32 KiB, else 16-byte aligned, except that a block whose size
  // rounds to an odd multiple of 8 (n < 256 only) is 8-byte aligned (no type
  // that needs 16 has such a size). Contents are unspecified. kNoSpace when
  // max_size would be exceeded or the file system is full.
  //
  // `kind` says whether the block may hold pointers (see AllocKind). One
  // call with the kind as an argument, rather than a second function, so
  // that layers that forward allocations (pm::allocator, the C API, a
  // store's entry allocator) pass it through. Containers of format 1 and 2
  // (slab heaps, made before granule pages) record no kinds: every block
  // there is an object block, and find_block() says so.
  virtual Result<void*> alloc(size_t n, AllocKind kind) = 0;
  Result<void*> alloc(size_t n) { return alloc(n, AllocKind::kObject); }

  // Frees a block returned by alloc(). nullptr is a no-op. kInvalidArgument if
  // p is not the start of an allocated block of this container. The pages
  // of a large block are allocated again only after the next commit (as
  // PMDK frees at a transaction's end): a transaction that frees and
  // allocates as much grows the heap by that much meanwhile.
  virtual Status free(void* p) = 0;

  // Shrinks the block starting at p in place to at least n bytes: a page
  // run gives its pages past that back to the heap (allocated again after
  // the commit, as freed pages are); smaller blocks stay as they are. Its
  // start and first n bytes are unchanged. kInvalidArgument as free().
  virtual Status shrink(void* p, size_t n) = 0;

  // The block containing p (its start, size and kind), or kNotFound if p is
  // in no allocated block.
  virtual Result<BlockInfo> find_block(const void* p) const = 0;

  // The root object (or nullptr), and named roots (names up to 47 bytes,
  // up to 32 names). Setting nullptr clears. Changes become durable at commit.
  virtual void* root(std::string_view name = {}) const = 0;
  virtual Status set_root(void* p, std::string_view name = {}) = 0;

  // Grows the heap to at least `heap_bytes` now (it also grows on demand).
  virtual Status reserve(uint64_t heap_bytes) = 0;

  // Announces that [p, p+n) is about to be written. Required with the hints
  // tracker; lets the mprotect tracker skip faults (and avoid EFAULT in
  // system calls); free with uffd.
  virtual void will_write(const void* p, size_t n) = 0;

  // Drops the working view's private copies of committed, unchanged pages,
  // returning their DRAM. Reads then come from the file again.
  virtual Status release_clean() = 0;

  // Copies [p, p+n) as the last commit left it in the file, whatever the
  // working view holds since (the pages a transaction will change keep
  // their committed bytes here: an undo copy need not be kept in DRAM).
  // kInvalidArgument when the range is not inside the heap; kNotSupported
  // on a read-only container (its view may hold a pending commit that the
  // file does not); the failure of a commit that failed past its commit
  // point (the file then holds part of it).
  virtual Status read_committed(const void* p, void* buf, size_t n) const = 0;

  // True if p points into this container's mapped heap.
  virtual bool contains(const void* p) const = 0;

  // Where the heap is mapped (fixed for the life of the file). Cheap.
  virtual void* base() const = 0;

  // A number that differs in every session that opens the container. A lock
  // word stored in a persistent object keeps the generation it was taken in;
  // a word from another generation is unlocked (locks never survive restarts).
  virtual uint64_t generation() const = 0;

  virtual ContainerInfo info() const = 0;
  // info() without dirty_pages (which waits for the commit gate and reads
  // the tracker): never waits for a commit, but costs a system call and
  // the heap's statistics (a walk of its bitmaps). For a mount's statfs;
  // heap_counters() is the O(1) one.
  virtual ContainerInfo usage() const = 0;
  // ContainerInfo::private_bytes alone: one atomic load, for a check after
  // every commit (usage() costs a system call and the heap's statistics).
  virtual uint64_t private_bytes() const = 0;
  // O(1): the heap's lock, no system call (usage() costs both and walks
  // the heap's bitmaps).
  virtual HeapCounters heap_counters() const = 0;
  // O(1): the tracker in use (never kAuto) and whether the open is
  // read-only, for a check before each call (info() closes the commit
  // gate, counts dirty pages and walks the heap).
  virtual TrackerKind tracker_kind() const = 0;
  virtual bool read_only() const = 0;

  // False when a commit of what changed since the last one would not fit
  // the journal's room in the file, on a file system that has refused the
  // file more room (a growth or a commit failed with kNoSpace, and no
  // growth succeeded since), or that room and the file system's free space
  // when that is below 64 MiB; true otherwise, and while nothing changed. A
  // program that batches many changes into one commit (the kvstore's
  // epochs) commits before it adds more, or its commit fails for want of
  // room and so do all the retries, which only grow. Cheap when the disk
  // has room (an atomic load); else a walk of the dirty pages.
  virtual bool commit_fits() { return true; }

  // Verifies the heap metadata (page maps, granule and slab bitmaps, data
  // block marks, counters) and reports escaping pointers in object blocks
  // reachable from the roots (data blocks are not scanned). Takes the
  // commit gate: no mutation runs meanwhile.
  //
  // A word is an escaping pointer when it points into a mapping of this
  // process outside the container. With `foreign_writer` (a file written by
  // another process, as in `pm check`), words in the address ranges where
  // Linux places other processes' heaps and stacks count too. The check is
  // conservative: stale bytes of an object block that look like such an
  // address (say, unused bytes of a short-string buffer copied from the
  // stack: see pm::zero_unused in pm/allocator.h) are reported too; keep
  // values in data blocks. Called while this thread holds a MutationGuard
  // (the check waits for every mutation), it checks nothing and says so in
  // `problems`.
  virtual CheckReport check(bool foreign_writer = false) = 0;

  // Frees every block not reachable from the root or the named roots.
  // Reachability is conservative: each aligned 8-byte word of a reachable
  // object block that points into a live block, read as an absolute address
  // or as a self-relative offset (boost::interprocess::offset_ptr), keeps
  // that block alive; interior pointers count. Nothing reachable is ever
  // freed. The price: an ordinary integer in an object block is a
  // self-relative offset too, so a count, length or index between 8 and
  // the heap's size (or a small negative one) keeps whatever block lies
  // that many bytes away alive. Keep such values in data blocks
  // (AllocKind::kData): a reachable data block is kept, but words in it
  // keep nothing alive, so a block reached only through one is freed.
  // The frees are ordinary changes: durable at the next commit(), undone by
  // abort(). With dry_run nothing is freed. Cost: proportional to the live
  // heap. kBusy if the calling thread holds a MutationGuard;
  // kInvalidArgument for a key-value store's file (layout "kvstore"),
  // which frees its own blocks and links some where this does not look.
  virtual Result<CollectReport> collect(bool dry_run = false) = 0;

  // The raw region: file bytes outside the heap (Options::raw_bytes, fixed
  // at create; size 0 when there is none), written and persisted outside
  // commit() for logs. See pm/raw_region.h.
  virtual RawRegion& raw() = 0;

  // Shared side of the commit gate; prefer MutationGuard. Re-entrant.
  virtual void begin_mutation() = 0;
  virtual void end_mutation() = 0;
  // True while this thread is inside begin_mutation() (an end_mutation()
  // without one does nothing).
  virtual bool in_mutation() const = 0;

  // Typed helpers.
  template <typename T>
  T* root(std::string_view name = {}) const {
    return static_cast<T*>(root(name));
  }
  // Allocates and constructs a T in the container.
  template <typename T, typename... Args>
  Result<T*> make(Args&&... args) {
    Result<void*> mem = alloc(sizeof(T));
    if (!mem.ok()) return mem.status();
    will_write(*mem, sizeof(T));
    return new (*mem) T(std::forward<Args>(args)...);
  }

 protected:
  Container() = default;
};

// Holds the shared side of a container's commit gate: commit() and abort()
// wait until no guard is held. Cheap (two atomic operations) and re-entrant.
class MutationGuard {
 public:
  explicit MutationGuard(Container& c) : c_(&c) { c_->begin_mutation(); }
  ~MutationGuard() {
    if (c_) c_->end_mutation();
  }
  MutationGuard(const MutationGuard&) = delete;
  MutationGuard& operator=(const MutationGuard&) = delete;

 private:
  Container* c_;
};

}  // namespace pm

#endif  // PM_CONTAINER_H_
