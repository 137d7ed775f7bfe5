#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <random>
#include <shared_mutex>
#include <vector>

#include "libpm/address_space.h"
#include "libpm/commit_gate.h"
#include "libpm/container_impl.h"
#include "libpm/escape_classifier.h"
#include "libpm/file_lock.h"
#include "libpm/heap.h"
#include "libpm/journal.h"
#include "libpm/planted_bugs.h"
#include "libpm/publish.h"
#include "libpm/raw_region.h"
#include "libpm/superblock.h"
#include "libpm/sync_point.h"
#include "libpm/tracker.h"
#include "libpm/view_lock.h"

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

constexpr uint64_t kPage = 4096;
constexpr uint64_t kGiB = 1ull << 30;
// Heap growth keeps at least heap / kJournalReserveShare of file room past
// the heap for the journal (grow_to).
constexpr uint64_t kJournalReserveShare = 64;

uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

Status check_create_options(const Options& o) {
  if (o.max_size == 0 || o.max_size % kGiB != 0 || o.max_size > (1ull << 40)) {
    return Status::invalid_argument("max_size must be a multiple of 1 GiB, at most 1 TiB");
  }
  if (o.initial_size < (1ull << 20) || o.initial_size > o.max_size) {
    return Status::invalid_argument("initial_size must be at least 1 MiB and at most max_size");
  }
  if (o.base_address % kGiB != 0) {
    return Status::invalid_argument("base_address must be 1 GiB-aligned");
  }
  // Where a process's addresses end (x86-64 maps below 2^47 unless asked
  // for more; arm64 at most 2^48): past it no reservation can succeed.
#if defined(__x86_64__)
  constexpr uint64_t kUserSpaceEnd = 1ull << 47;
#else
  constexpr uint64_t kUserSpaceEnd = 1ull << 48;
#endif
  if (o.base_address != 0 && (o.base_address >= kUserSpaceEnd ||
                              o.max_size > kUserSpaceEnd - o.base_address)) {
    return Status::invalid_argument("base_address + max_size lies past the address space a "
                                    "process has (" + std::to_string(kUserSpaceEnd >> 40) +
                                    " TiB)");
  }
  if (o.layout.size() > 31) return Status::invalid_argument("layout name longer than 31 bytes");
  if (o.raw_bytes > kMaxRawBytes) return Status::invalid_argument("raw_bytes over 16 GiB");
  if (o.file_mode > 0777 || (o.file_mode & 0600) != 0600) {
    return Status::invalid_argument("file_mode must give the owner read and write (0600 at least) "
                                    "and hold permission bits only (at most 0777)");
  }
  return Status();
}

Superblock make_superblock(const Options& o, uint64_t base, uint64_t heap_offset) {
  Superblock sb;
  std::memset(&sb, 0, sizeof sb);
  std::memcpy(sb.magic, kSuperblockMagic, sizeof sb.magic);
  sb.version = kFormatVersion;
  sb.superblock_size = sizeof sb;
  sb.page_size = kPageSize;
  sb.heap_offset = heap_offset;
  sb.base_address = base;
  sb.max_size = o.max_size;
  sb.created_ns = static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                            std::chrono::system_clock::now().time_since_epoch())
                                            .count());
  std::random_device rd;
  for (auto& b : sb.uuid) b = static_cast<uint8_t>(rd());
  std::memcpy(sb.layout, o.layout.data(), o.layout.size());
  sb.checksum = superblock_checksum(sb);
  return sb;
}

// Open containers, for Container::owner_of(). Few entries; a reader lock.
std::shared_mutex g_open_mu;
std::vector<Container*> g_open;

class ContainerImpl final : public Container {
 public:
  ContainerImpl(std::string path, Options options)
      : path_(std::move(path)), options_(std::move(options)) {}
  ~ContainerImpl() override;

  Status init_new(const PersistOpener& opener);
  Status init_existing(const PersistOpener& opener);
  Status check_same_file(const std::string& path) const;
  Status read_superblock(uint64_t file_size);
  Status repair_superblock();

  Status commit() override;
  Status abort() override;
  using Container::alloc;
  Result<void*> alloc(size_t n, AllocKind kind) override;
  Status free(void* p) override;
  Status shrink(void* p, size_t n) override;
  Result<BlockInfo> find_block(const void* p) const override;
  void* root(std::string_view name) const override { return heap_->root(name); }
  Status set_root(void* p, std::string_view name) override;
  Status reserve(uint64_t heap_bytes) override;
  void will_write(const void* p, size_t n) override;
  Status release_clean() override;
  Status read_committed(const void* p, void* buf, size_t n) const override;
  bool contains(const void* p) const override;
  void* base() const override { return reservation_.base(); }
  uint64_t generation() const override { return generation_; }
  ContainerInfo info() const override;
  ContainerInfo usage() const override;
  uint64_t private_bytes() const override {
    return private_pages_.load(std::memory_order_relaxed) * kPage;
  }
  HeapCounters heap_counters() const override { return heap_->counters(); }
  CheckReport check(bool foreign_writer) override;
  Result<CollectReport> collect(bool dry_run) override;
  void begin_mutation() override { gate_.enter(); }
  // The file a failed create must remove ("" if none).
  const std::string& created_file() const { return created_file_; }
  void end_mutation() override { (void)gate_.leave(); }
  bool in_mutation() const override { return gate_.held_by_this_thread(); }
  RawRegion& raw() override { return *raw_; }

 private:
  void log(LogLevel level, const std::string& msg) const {
    if (options_.logger) options_.logger(level, msg);
  }
  Status recover();
  Status map_and_attach();
  void replay_into_working_view();
  // OK, or why the container takes no changes: opened read-only, or a
  // write-back failure broke it (see commit()).
  Status usable() const {
    if (options_.read_only) {
      return Status::read_only(path_ + ": opened read-only; open it writable to change it");
    }
    PM_TRY(FileLock::check_not_forked(forks_at_open_, path_));
    if (!broken_.load(std::memory_order_acquire)) return Status();
    std::lock_guard<std::mutex> l(persist_mu_);
    return failed_;
  }
  Status grow_to(uint64_t new_heap_size);
  Status commit_locked();
  // Rewrites the pending header of the last (fully applied) commit as
  // applied, and the other slot's if it is still pending (journal.h). Both,
  // always: a commit that fails after this (no room on a full disk) leaves
  // journal_pending_ false, so the close marks nothing, and a pending older
  // slot would be replayed over newer data if the newest header were ever
  // damaged.
  Status mark_applied(bool closing = false) {
    PM_TRY(drain_deferred());
    const bool planted = closing ? g_planted_bugs.close_marks_newest_only
                                 : g_planted_bugs.finish_marks_newest_only;
    PM_TRY(mark_journal_slots_applied(*persist_, seq_.load(), slots(), !planted));
    journal_pending_ = false;
    journal_state_ = JournalState::kApplied;
    return Status();
  }
  // Journal header slots (journal.h): two from format version 4.
  int slots() const { return sb_.version >= 4 ? 2 : 1; }
  // Makes a deferred write-back (journal.h) durable; a failure breaks the
  // container, since that commit is then durable only in its journal.
  Status drain_deferred();
  // Where the journal of `runs` goes: past everything mapped, and off the
  // body of a deferred write-back (journal.h, rule 2).
  uint64_t place_body(uint64_t len) const;
  // grow_for_journal, under view_mu_: growing the file remaps the view that
  // raw-region writers use.
  Status grow_journal_room(uint64_t body_at, const std::vector<Run>& runs) {
    std::lock_guard<ViewLock> v(view_mu_);
    return grow_for_journal(*persist_, body_at, runs);
  }
  // Breaks the container (see commit() in the public header): `s` is its error.
  Status break_with(Status s) {
    failed_ = std::move(s);
    broken_.store(true, std::memory_order_release);
    return failed_;
  }
  void remember_committed(const std::vector<PageRun>& pages);
  // Moves from `runs` to `fresh` what goes home before the commit point
  // instead of through the journal (journal.h, "Fresh bytes").
  void take_fresh(std::vector<Run>* runs, std::vector<Run>* fresh);
  void find_escapes(bool foreign_writer, CheckReport* r) const;
  // Pages among `pages` whose working copy differs from home. REQUIRES: persist_mu_.
  uint64_t count_changed(const std::vector<PageRun>& pages) const;

  std::string path_;
  Options options_;
  FileLock lock_;
  std::unique_ptr<Persist> persist_;
  Superblock sb_{};
  std::string superblock_problem_;  // read from the copy: why (for check())
  std::string copy_problem_;        // the copy damaged, the superblock sound (for check())
  AddressReservation reservation_;
  std::unique_ptr<DirtyTracker> tracker_;
  std::unique_ptr<Heap> heap_;
  mutable CommitGate gate_;
  // Serialises use of persist_ between commit/abort (gate closed), growth
  // (inside alloc, gate open) and info().
  mutable std::mutex persist_mu_;
  // Raw-region calls hold it shared; growth (which remaps persist_'s view)
  // holds it exclusively.
  ViewLock view_mu_;
  // Under persist_mu_: the smallest heap size growth found no room for
  // since the last commit (0: none), the file system's free bytes just
  // before that attempt, and why. Growth to it or beyond fails at once
  // until a commit is made or the file system has more free bytes: on a full
  // disk every allocation tries to grow, and a failing fallocate of
  // megabytes costs a millisecond or more (a put once waited 11 s).
  uint64_t no_room_from_ = 0;
  uint64_t no_room_free_ = 0;
  Status no_room_;
  uint64_t heap_off_ = kHeapOffset;  // file offset of the heap (after the raw region)
  std::atomic<uint64_t> mapped_{0};  // heap bytes mapped in the working view
  // Written under persist_mu_; atomic so that usage() reads them without it.
  std::atomic<uint64_t> seq_{0};  // last commit's journal sequence number
  bool journal_pending_ = false;     // header says pending (not yet marked applied)
  std::atomic<JournalState> journal_state_{JournalState::kEmpty};
  // A read-only open of a pending journal: the commits applied in this
  // process's copies only (recover(), map_and_attach()).
  std::vector<JournalHeader> read_only_replay_;
  const uint64_t forks_at_open_ = FileLock::forks();  // a fork()ed child changes nothing
  bool is_pmem_ = false;
  Status failed_;                    // write-back failed after a commit point (persist_mu_)
  std::atomic<bool> broken_{false};  // failed_ is set
  std::unique_ptr<RawRegionImpl> raw_;
  uint64_t generation_ = 0;
  std::string created_file_;                // init_new made this file (removed on failure)
  std::vector<PageRun> committed_private_;  // committed pages still private (DRAM)
  std::atomic<uint64_t> private_pages_{0};  // their count (overlaps counted twice until merged)
  std::vector<PageRun> dirty_scratch_;
  std::vector<PageRun> lines_scratch_;  // line numbers (hints tracker)
  std::vector<Run> runs_scratch_;
  std::vector<Run> fresh_scratch_;
  std::vector<Run> fresh_kept_scratch_, fresh_still_scratch_;  // take_fresh's
  // Under persist_mu_: the last commit's journal entries (by offset), which
  // a recovery may replay while its header is pending; fresh bytes of a
  // failed commit, already home, which the next commit's diff cannot see.
  std::vector<Run> last_runs_;
  std::vector<Run> fresh_retry_;
  // Bytes written through journals, and fresh bytes written home directly,
  // since open (ContainerInfo).
  std::atomic<uint64_t> journaled_bytes_{0};
  std::atomic<uint64_t> fresh_bytes_{0};
  std::vector<std::byte> journal_stage_;  // write_journal's staging buffer
  // Under persist_mu_: the last commit's write-back waits for the next
  // commit's drain (journal.h); where that commit's journal body lies.
  bool deferred_ = false;
  uint64_t deferred_body_off_ = 0;
  uint64_t deferred_body_len_ = 0;
};

ContainerImpl::~ContainerImpl() {
  {
    std::unique_lock<std::shared_mutex> l(g_open_mu);
    g_open.erase(std::remove(g_open.begin(), g_open.end(), this), g_open.end());
  }
  if (persist_ && journal_pending_ && failed_.ok() && FileLock::forks() == forks_at_open_) {
    (void)mark_applied(/*closing=*/true);  // (a fork()ed child leaves the parent's file alone)
  }
  // The tracker goes before the mapping it watches; the lock goes last.
  tracker_.reset();
  heap_.reset();
  reservation_ = AddressReservation();
  persist_.reset();
}

// The temporary a create builds the file under: beside it, hidden.
std::string creating_name(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "" : path.substr(0, slash + 1);
  return dir + "." + path.substr(dir.size()) + ".creating";
}

// Locks the temporary of a create: a new one, or one a killed create left
// behind (a live creator holds its lock: kBusy).
Result<FileLock> lock_creating(const std::string& tmp, mode_t mode) {
  for (int attempt = 0; attempt < 3; attempt++) {
    Result<FileLock> l = FileLock::acquire(tmp, /*create=*/true, /*shared=*/false, mode);
    if (l.ok() || l.status().code() != Code::kInvalidArgument) return l;
    Result<FileLock> stale = FileLock::acquire(tmp, /*create=*/false);
    if (!stale.ok()) {
      if (stale.status().code() == Code::kNotFound) continue;  // gone meanwhile
      return stale.status();
    }
    // Ours now, unless a creator renamed it in between: then tmp names
    // another file (or none), and that one is not ours to reuse.
    struct stat a, b;
    if (::fstat(stale->fd(), &a) != 0 || ::stat(tmp.c_str(), &b) != 0 || a.st_ino != b.st_ino) {
      continue;
    }
    if (::ftruncate(stale->fd(), 0) != 0) return Status::from_errno("reset " + tmp, errno);
    return stale;
  }
  return Status::busy(tmp + ": other processes keep creating this container");
}

// Why a create could not make its file, when the directory is the reason:
// missing, or closed to us (the failure names the hidden temporary).
Status check_create_dir(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  if (::faccessat(AT_FDCWD, dir.c_str(), W_OK | X_OK, AT_EACCESS) == 0) return Status();
  const int err = errno;
  if (err == ENOENT || err == ENOTDIR) return Status::not_found(path + ": no directory " + dir);
  if (err == EACCES || err == EROFS || err == EPERM) {
    return Status::read_only(path + ": no write access to " + dir + " (" + std::strerror(err) + ")");
  }
  return Status::from_errno(path + ": directory " + dir, err);
}

Status ContainerImpl::init_new(const PersistOpener& opener) {
  PM_TRY(check_create_options(options_));
  if (::access(path_.c_str(), F_OK) == 0) {
    return Status::invalid_argument(path_ + " already exists; open it, or remove it first");
  }
  // Built under a temporary name, published by a rename once complete: a
  // crash never leaves a half-made file at the path (options.h).
  const std::string tmp = creating_name(path_);
  Result<FileLock> lock = lock_creating(tmp, static_cast<mode_t>(options_.file_mode));
  if (!lock.ok()) {
    const Status dir = check_create_dir(path_);  // says why in the user's terms, if it can
    return dir.ok() ? lock.status() : dir;
  }
  lock_ = std::move(*lock);
  created_file_ = tmp;
  const uint64_t heap_size = align_up(options_.initial_size, kPage);
  heap_off_ = kHeapOffset + align_up(options_.raw_bytes, kPage);
  PM_TRY(check_file_size_limit(heap_off_ + heap_size, path_));
  if (::ftruncate(lock_.fd(), static_cast<off_t>(heap_off_ + heap_size)) != 0) {
    return Status::from_errno("size " + tmp, errno);
  }
  // Every byte the mappings will write must have its blocks now: a store
  // into a hole of a shared mapping on a full disk raises SIGBUS.
  PM_TRY(allocate_file_space(lock_.fd(), 0, heap_off_ + heap_size, path_));
  Result<AddressReservation> res =
      options_.base_address ? AddressReservation::at(options_.base_address, options_.max_size)
                            : AddressReservation::anywhere(options_.max_size);
  if (!res.ok()) return res.status();
  reservation_ = std::move(*res);
  Result<std::unique_ptr<Persist>> p = opener(tmp);
  if (!p.ok()) return p.status();
  persist_ = std::move(*p);
  PM_TRY(check_same_file(tmp));

  // The heap image first, the superblock last.
  std::vector<std::byte> image(kPage * 2 + heap_size / kPage * 4);
  Heap::format(image.data(), heap_size);
  persist_->write_flushed(heap_off_, image.data(), image.size());
  PM_TRY(persist_->drain());
  sb_ = make_superblock(options_, reinterpret_cast<uint64_t>(reservation_.base()), heap_off_);
  persist_->write_flushed(kSuperblockCopyOffset, &sb_, sizeof sb_);
  persist_->write_flushed(0, &sb_, sizeof sb_);
  PM_TRY(persist_->drain());
  if (::fsync(lock_.fd()) != 0) return Status::from_errno("fsync " + tmp, errno);
  PM_TRY(map_and_attach());
  if (options_.initialize) {
    PM_TRY(options_.initialize(*this));
    PM_TRY(commit());
  }
  PM_TRY(publish(tmp, path_));
  persist_->set_path(path_);
  created_file_ = path_;
  return Status();
}

// The superblock, or its copy when the superblock itself is damaged (a
// flipped byte there made every object of an intact file unreadable).
Status ContainerImpl::read_superblock(uint64_t file_size) {
  if (::pread(lock_.fd(), &sb_, sizeof sb_, 0) != static_cast<ssize_t>(sizeof sb_)) {
    return Status::from_errno("read superblock", errno);
  }
  Status s = validate_superblock(sb_, file_size);
  Superblock copy;
  const bool copy_read =
      ::pread(lock_.fd(), &copy, sizeof copy, kSuperblockCopyOffset) == sizeof copy;
  if (s.ok()) {
    // Both are written once, at create, with the same bytes; files made
    // before the copy existed hold zeros there.
    static const Superblock kNone{};
    if (!copy_read || (std::memcmp(&copy, &sb_, sizeof copy) != 0 &&
                       std::memcmp(&copy, &kNone, sizeof copy) != 0)) {
      copy_problem_ = "the superblock's copy at byte " + std::to_string(kSuperblockCopyOffset) +
                      " is damaged (it differs from the superblock)";
      log(LogLevel::kWarn, copy_problem_);
    }
    return s;
  }
  // A flipped version byte reads as a newer format: the copy tells (a
  // file a newer build made says so in both).
  if (!s.is_corruption() && s.code() != Code::kNotSupported) return s;
  if (!copy_read || !validate_superblock(copy, file_size).ok()) return s;
  sb_ = copy;
  superblock_problem_ = "superblock damaged (" + s.message() + "); its copy at byte " +
                        std::to_string(kSuperblockCopyOffset) + " was used";
  log(LogLevel::kWarn, superblock_problem_);
  return Status();
}

// A writable open rewrites a damaged superblock from the copy it used, or
// a damaged copy from the superblock. Both hold the same bytes, so a crash
// in between leaves one of them intact.
Status ContainerImpl::repair_superblock() {
  if (options_.read_only) return Status();
  if (!copy_problem_.empty()) {
    persist_->write_flushed(kSuperblockCopyOffset, &sb_, sizeof sb_);
    PM_TRY(persist_->drain().with_context("rewrite the superblock's copy in " + path_));
    log(LogLevel::kWarn, "rewrote the superblock's copy");
    copy_problem_ += ", and was rewritten from it";
  }
  if (superblock_problem_.empty()) return Status();
  persist_->write_flushed(0, &sb_, sizeof sb_);
  PM_TRY(persist_->drain().with_context("rewrite the superblock of " + path_));
  log(LogLevel::kWarn, "rewrote the superblock from its copy");
  superblock_problem_ += " and the superblock rewritten from it";
  return Status();
}

// The home view opens the file by name after the lock did: the same file,
// unless the path was renamed over meanwhile.
Status ContainerImpl::check_same_file(const std::string& path) const {
  if (persist_->same_file(lock_.fd())) return Status();
  return Status::busy(path + " was replaced by another file while it was being opened; "
                      "open it again");
}

Status ContainerImpl::init_existing(const PersistOpener& opener) {
  const bool ro = options_.read_only;
  Result<FileLock> lock = FileLock::acquire(path_, /*create=*/false, /*shared=*/ro);
  if (!lock.ok()) return lock.status();
  lock_ = std::move(*lock);
  struct stat st;
  if (::fstat(lock_.fd(), &st) != 0) return Status::from_errno("stat " + path_, errno);
  if (static_cast<uint64_t>(st.st_size) < sizeof(Superblock)) {
    return Status::corruption("file is " + std::to_string(st.st_size) +
                              " bytes: too small to be a container (truncated, or not one)");
  }
  PM_TRY(read_superblock(static_cast<uint64_t>(st.st_size)));
  heap_off_ = sb_.heap_offset;
  if (!options_.layout.empty() && options_.layout != sb_.layout) {
    return Status::invalid_argument("layout is '" + std::string(sb_.layout) +
                                    "', the program expects '" + options_.layout + "'");
  }
  PM_TRY(fill_holes(lock_.fd(), st, ro, path_));
  Result<std::unique_ptr<Persist>> p = ro ? open_read_only_file(path_) : opener(path_);
  if (!p.ok()) return p.status();
  persist_ = std::move(*p);
  PM_TRY(check_same_file(path_));
  PM_TRY(repair_superblock());
  PM_TRY(recover());
  Result<AddressReservation> res = AddressReservation::at(sb_.base_address, sb_.max_size);
  if (!res.ok()) return res.status();
  reservation_ = std::move(*res);
  return map_and_attach();
}

Status ContainerImpl::recover() {
  if (slots() == 2 && !options_.read_only && !g_planted_bugs.open_skips_slot_sync) {
    // Rule 3 (journal.h): the slots as read here (the page cache, after a
    // kill) become what the disk holds before any body is placed by them.
    persist_->flush(kJournalHeaderOffset, 2 * sizeof(JournalHeader));
    PM_TRY(persist_->drain().with_context("recovery"));
  }
  JournalStatus js = read_journal(*persist_, heap_off_, slots());
  seq_ = js.last_seq;
  journal_state_ = js.state;
  if (js.state == JournalState::kTorn) {
    log(LogLevel::kWarn, "ignored the torn journal of commit " + std::to_string(js.header.seq) +
                             " (" + js.why + "): that commit never completed");
    return Status();
  }
  if (js.state != JournalState::kPending) return Status();
  if (!js.why.empty()) log(LogLevel::kWarn, "ignored the journal of " + js.why);
  if (options_.read_only) {
    // The commit is complete in the journal, its write-back maybe not (a
    // kill, or the deferred write-back): this process sees it applied in
    // its private copies, the home view now and the working view once
    // mapped (map_and_attach); the file is left for a writable open.
    if (js.has_previous) read_only_replay_.push_back(js.previous);
    read_only_replay_.push_back(js.header);
    for (const JournalHeader& h : read_only_replay_) {
      for_each_journal_entry(*persist_, h, [&](uint64_t off, const std::byte* src, uint64_t len) {
        persist_->write(heap_off_ + off, src, len);
      });
    }
    log(LogLevel::kInfo, "read-only: commit " + std::to_string(js.header.seq) +
                             " is applied in this process's view only; a writable open "
                             "finishes it in the file");
    return Status();
  }
  auto t0 = std::chrono::steady_clock::now();
  if (js.has_previous) {
    PM_TRY(replay_journal(*persist_, js.previous, heap_off_, slots()).with_context("recovery"));
  }
  PM_TRY(replay_journal(*persist_, js.header, heap_off_, slots()).with_context("recovery"));
  journal_state_ = JournalState::kApplied;
  auto us =
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0)
          .count();
  log(LogLevel::kInfo, "recovered: replayed commit " + std::to_string(js.header.seq) + " (" +
                           std::to_string(js.header.body_len) + " journal bytes) in " +
                           std::to_string(us) + " us");
  return Status();
}

// A read-only open of a pending journal (recover()): the working view,
// mapped from the file, gets the commits too.
void ContainerImpl::replay_into_working_view() {
  if (g_planted_bugs.read_only_view_skips_replay) return;
  const uint64_t size = mapped_.load();
  for (const JournalHeader& h : read_only_replay_) {
    for_each_journal_entry(*persist_, h, [&](uint64_t off, const std::byte* src, uint64_t len) {
      if (off <= size && len <= size - off) std::memcpy(reservation_.base() + off, src, len);
    });
  }
}

Status ContainerImpl::map_and_attach() {
  const auto* hh = reinterpret_cast<const HeapHeader*>(persist_->view() + heap_off_);
  const uint64_t file_heap = persist_->size() - heap_off_;
  uint64_t heap_size = hh->heap_size;
  // Format 3 files hold a granule heap (PMHEAP02), older ones a slab heap.
  const uint64_t magic = sb_.version >= 3 ? kHeapMagicV2 : kHeapMagic;
  if (hh->magic != magic || heap_size % kPage != 0 || heap_size < 2 * kPage) {
    return Status::corruption("heap header damaged");
  }
  if (heap_size > file_heap || heap_size > sb_.max_size) {
    return Status::corruption("file truncated: heap needs " + std::to_string(heap_size) +
                              " bytes, the file holds " + std::to_string(file_heap));
  }
  PM_TRY(reservation_.map_private(0, heap_size, lock_.map_fd(), heap_off_));
  mapped_ = heap_size;
  replay_into_working_view();
  is_pmem_ = persist_->is_pmem();
  raw_ = std::make_unique<RawRegionImpl>(&persist_, &view_mu_, kHeapOffset, heap_off_ - kHeapOffset,
                                         path_, options_.read_only);
  std::string why;
  // Read-only: nothing will be committed, so nothing is tracked.
  const TrackerKind kind = options_.read_only ? TrackerKind::kHints : options_.tracker;
  Result<std::unique_ptr<DirtyTracker>> t = make_tracker(kind, sb_.max_size,
                                                               options_.uffd_chunk_mode_above, &why);
  if (!t.ok()) return t.status();
  tracker_ = std::move(*t);
  PM_TRY(tracker_->track(reservation_.base(), heap_size));
  log(LogLevel::kInfo, std::string("tracker ") + tracker_name(tracker_->kind()) + " (" + why + ")");
  heap_ = std::make_unique<Heap>(reservation_.base(), sb_.max_size, tracker_.get(),
                                 [this](uint64_t n) { return grow_to(n); });
  PM_TRY(heap_->attach(heap_size));
  generation_ = heap_->bump_generation();
  std::unique_lock<std::shared_mutex> l(g_open_mu);
  g_open.push_back(this);
  return Status();
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
    if (seq_.load() != seq) no_room_from_ = 0;
  }
  // Outside persist_mu_ (lock order: heap, then persist); the gate is still
  // closed, so nothing allocates before the freed pages are indexed.
  heap_->committed();
  return Status();
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
  // The working view now reads the file wherever a failed commit wrote
  // fresh bytes home: no later commit needs them.
  std::lock_guard<std::mutex> l(persist_mu_);
  fresh_retry_.clear();
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

}  // namespace

Result<std::unique_ptr<Container>> open_container(const std::string& path, const Options& options,
                                                  bool create, const PersistOpener& opener) {
  if (path.empty()) return Status::invalid_argument("the container's path is empty");
  auto c = std::make_unique<ContainerImpl>(path, options);
  if (create && options.read_only) {
    return Status::invalid_argument("create " + path + ": read_only is for opening");
  }
  if (!create && options.create_if_missing && !options.read_only && ::access(path.c_str(), F_OK) != 0 &&
      errno == ENOENT) {
    create = true;
  }
  Status s;
  try {
    s = create ? c->init_new(opener) : c->init_existing(opener);
  } catch (const std::bad_alloc&) {
    s = Status::no_space("out of memory");
  }
  if (!s.ok()) {
    const std::string remove_file = c->created_file();
    c.reset();
    // A half-created file is not a container: do not leave it behind.
    if (!remove_file.empty()) ::unlink(remove_file.c_str());
    return s.with_context((create ? "create " : "open ") + path);
  }
  return std::unique_ptr<Container>(std::move(c));
}

Result<std::unique_ptr<Container>> Container::create(const std::string& path,
                                                     const Options& options) {
  return open_container(path, options, true, open_pmem_file);
}

Result<std::unique_ptr<Container>> Container::open(const std::string& path,
                                                   const Options& options) {
  return open_container(path, options, false, open_pmem_file);
}

Container* Container::owner_of(const void* p) {
  std::shared_lock<std::shared_mutex> l(g_open_mu);
  for (Container* c : g_open) {
    if (c->contains(p)) return c;
  }
  return nullptr;
}

Status Container::remove(const std::string& path) {
  Result<FileLock> lock = FileLock::acquire(path, /*create=*/false);
  if (!lock.ok()) return lock.status().with_context("remove");
  // The superblock's magic, or its copy's (a damaged superblock).
  auto magic_at = [&](uint64_t off) {
    char magic[sizeof kSuperblockMagic];
    return ::pread(lock->fd(), magic, sizeof magic, static_cast<off_t>(off)) ==
               static_cast<ssize_t>(sizeof magic) &&
           std::memcmp(magic, kSuperblockMagic, sizeof magic) == 0;
  };
  if (!magic_at(0) && !magic_at(kSuperblockCopyOffset)) {
    return Status::invalid_argument("remove " + path + ": not a libpm container; left alone");
  }
  if (::unlink(path.c_str()) != 0) return Status::from_errno("remove " + path, errno);
  return Status();
}

}  // namespace pm
