// Creating and opening a container: the file built under a temporary name
// and published, the superblock read (or repaired from its copy), the
// journal recovered, the heap mapped at its address.

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <random>
#include <string>

#include "libpm/container_impl.h"
#include "libpm/publish.h"
#include "libpm/sync_point.h"

namespace pm {

namespace {

constexpr uint64_t kGiB = 1ull << 30;

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

}  // namespace

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

// The end of what recovery and the heap read of the file: the heap as its
// header on the file says, and every journal body a valid header names,
// whatever its state. Past it lies journal room, or a growth a crash cut
// short (fill_holes). Unknown (the whole file) when the heap header is not
// sound by map_and_attach's rules: a damaged size must not cut live pages.
uint64_t ContainerImpl::bytes_in_use(int fd) const {
  HeapHeader hh{};
  const uint64_t magic = sb_.version >= 3 ? kHeapMagicV2 : kHeapMagic;
  if (::pread(fd, &hh, sizeof hh, static_cast<off_t>(heap_off_)) != sizeof hh ||
      hh.magic != magic || hh.heap_size % kPage != 0 || hh.heap_size < 2 * kPage ||
      hh.heap_size > sb_.max_size) {
    return UINT64_MAX;
  }
  uint64_t end = heap_off_ + hh.heap_size;
  for (int i = 0; i < slots(); i++) {
    JournalHeader h{};
    const off_t at = static_cast<off_t>(journal_slot_offset(static_cast<uint64_t>(i), slots()));
    if (::pread(fd, &h, sizeof h, at) != sizeof h || h.magic != kJournalMagic ||
        h.checksum != journal_header_checksum(h)) {
      continue;
    }
    if (h.body_offset > UINT64_MAX - h.body_len) return UINT64_MAX;
    end = std::max(end, h.body_offset + h.body_len);
  }
  return end;
}

Status ContainerImpl::init_existing(const PersistOpener& opener) {
  const bool ro = options_.read_only;
  Result<FileLock> lock = FileLock::acquire(path_, /*create=*/false, /*shared=*/ro);
  if (!lock.ok()) return lock.status();
  lock_ = std::move(*lock);
  struct stat st;
  if (::fstat(lock_.fd(), &st) != 0) return Status::from_errno("stat " + path_, errno);
  if (!S_ISREG(st.st_mode)) {
    return Status::invalid_argument(
        path_ + ": not a regular file (a FIFO, device or socket), so no container");
  }
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
  PM_TRY(fill_holes(lock_.fd(), st, ro, bytes_in_use(lock_.fd()), path_));
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
  sample_space(true);
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
  add_to_open_list();
  return Status();
}

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
