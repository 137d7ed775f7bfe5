// Regression tests for the defects of issue 11, each the exact sequence a
// review found, replayed on the simulated persistence layer (sim_persist.h):
// each test also runs the sequence with the defect planted back and checks
// that it then goes wrong, so the test could not pass by accident.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <thread>
#include <vector>

#include "crash/sim_persist.h"
#include "kv/store.h"
#include "kvstore/crl.h"
#include "kvstore/planted_bugs.h"
#include "kvstore/store_impl.h"
#include "libpm/container_impl.h"
#include "libpm/planted_bugs.h"
#include "libpm/superblock.h"
#include "libpm/sync_point.h"
#include "testutil/small_fs.h"
#include "testutil/store_options.h"
#include "testutil/temp_dir.h"

namespace pm::crash {
namespace {

std::vector<std::byte> read_file(const std::string& path) {
  std::vector<std::byte> bytes;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  std::byte buf[1 << 16];
  for (ssize_t n; fd >= 0 && (n = ::read(fd, buf, sizeof buf)) > 0;) {
    bytes.insert(bytes.end(), buf, buf + n);
  }
  if (fd >= 0) ::close(fd);
  return bytes;
}

void write_file(const std::string& path, const std::vector<std::byte>& bytes) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::write(fd, bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
  ::close(fd);
}

// A container that starts at 1 MiB and grows to 1 GiB, tracked by hints.
Options small_container_options() {
  Options o;
  o.initial_size = 1 << 20;
  o.max_size = 1ull << 30;
  o.tracker = TrackerKind::kHints;
  return o;
}

// A container file on simulated persistence: `sim` tells what a power
// failure would keep at any moment.
struct SimFile {
  std::string path;
  UnitMode mode;
  SimPersist* sim = nullptr;

  PersistOpener opener(const std::vector<std::byte>* durable = nullptr) {
    return [this, durable](const std::string& p) -> Result<std::unique_ptr<Persist>> {
      Result<std::unique_ptr<Persist>> real = open_pmem_file(p);
      if (!real.ok()) return real.status();
      auto sp = std::make_unique<SimPersist>(
          std::move(*real), mode, [](SimPersist&, const std::string&) {}, p, durable);
      sim = sp.get();
      return std::unique_ptr<Persist>(std::move(sp));
    };
  }
  // The file as a small container, through the simulation.
  Result<std::unique_ptr<Container>> open(bool create) {
    return open_container(path, small_container_options(), create, opener());
  }
  // After a simulated power failure: the file as it is, without the simulation.
  Result<std::unique_ptr<Container>> open_real() const {
    return open_container(path, small_container_options(), false, open_pmem_file);
  }
};

// Runs fn at the first sync point named `name` reached by another thread.
class AtPoint {
 public:
  AtPoint(const char* name, std::function<void()> fn) {
    name_ = name;
    fn_ = std::move(fn);
    sync_point::g_hook.store(&AtPoint::hook);
  }
  ~AtPoint() {
    sync_point::g_hook.store(nullptr);
    fn_ = nullptr;
  }

 private:
  static void hook(const char* name, sync_point::Kind) {
    if (fn_ == nullptr || std::strcmp(name, name_) != 0) return;
    auto fn = std::move(fn_);
    fn_ = nullptr;
    fn();
  }
  static inline const char* name_ = nullptr;
  static inline std::function<void()> fn_;
};

kv::StoreOptions one_log(kv::Durability d) {
  kv::StoreOptions o = pm::test::small_store_options();
  o.logs = 1;
  o.max_key_bytes = 32;
  o.durability = d;
  return o;
}

std::unique_ptr<Container> must_open(const std::string& path, const kv::StoreOptions& o,
                                     bool create, const PersistOpener& opener) {
  Result<std::unique_ptr<Container>> c = open_container(path, kv::container_options(o), create,
                                                        opener);
  EXPECT_TRUE(c.ok()) << c.status().to_string();
  if (!c.ok()) return nullptr;
  if (create) {
    EXPECT_TRUE(kv::format_store(c->get(), o).ok());
    EXPECT_TRUE((*c)->commit().ok());
  }
  return std::move(*c);
}

std::unique_ptr<kv::Store> must_store(Container* c, const kv::StoreOptions& o) {
  Result<std::unique_ptr<kv::Store>> s = kv::open_store_on(c, o);
  EXPECT_TRUE(s.ok()) << s.status().to_string();
  return s.ok() ? std::move(*s) : nullptr;
}

std::string get(kv::Store& s, const std::string& k) {
  std::string v;
  kv::Status st = s.get(k, &v);
  return st.ok() ? v : st.is_not_found() ? "<none>" : "<error " + st.to_string() + ">";
}

// What the store holds for `key` after recovering `path` (real persistence).
std::string recovered(const std::string& path, const kv::StoreOptions& o, const std::string& key) {
  std::unique_ptr<Container> c = must_open(path, o, false, open_pmem_file);
  if (c == nullptr) return "<no container>";
  Result<std::unique_ptr<kv::Store>> s = kv::open_store_on(c.get(), o);
  if (!s.ok()) return s.status().is_corruption() ? "<corruption>" : s.status().to_string();
  return get(**s, key);
}

// --- Defect 1: write collapsing skipped a durable record for a non-durable one.

// put(k, v1) returns; put(k, v2) is logged but waits for its msync; an epoch
// gleans v1 (superseded by v2: skipped) and commits the head past it; the
// power fails before v2's msync.
std::string collapse_then_power_failure(const std::string& dir) {
  SimFile f{dir + "/c.pm", UnitMode::kMsyncPages};
  const kv::StoreOptions o = one_log(kv::Durability::kSync);
  std::vector<std::byte> crash;
  {
    std::unique_ptr<Container> c = must_open(f.path, o, true, f.opener());
    std::unique_ptr<kv::Store> s = must_store(c.get(), o);
    EXPECT_TRUE(s->put("k", "v1").ok());
    AtPoint at("kv.update.installed", [&] {
      EXPECT_TRUE(s->glean(1).ok());  // v1: superseded by v2
      EXPECT_TRUE(s->advance_epoch().ok());
      crash = f.sim->durable_image();
    });
    std::thread t([&] { EXPECT_TRUE(s->put("k", "v2").ok()); });
    t.join();
  }
  write_file(f.path, crash);
  return recovered(f.path, o, "k");
}

TEST(Issue11Defect1, AHeadPassesACollapsedRecordOnlyOnceItsSuccessorIsDurable) {
  test::TempDir dir;
  const std::string v = collapse_then_power_failure(dir.path());
  EXPECT_TRUE(v == "v1" || v == "v2") << "recovered " << v;

  kv::g_kv_planted_bugs.epoch_skips_log_sync = true;
  test::TempDir dir2;
  EXPECT_EQ(collapse_then_power_failure(dir2.path()), "<none>");
  kv::g_kv_planted_bugs = kv::KvPlantedBugs();
}

// --- Defect 2: stale records of an older session came back after a clean reopen.

// Session 1 (kAsync): R1 synced; R2..R5 written, R2 torn by the power
// failure, R3..R5 landed. Session 2 recovers R1, writes records of the same
// sizes over R2 and R3 (x = "new"), checkpoints (the head lands exactly on
// stale R4, which also sets x) and closes cleanly; its close mark over R4's
// header is lost to a power failure (marks are not persisted). Session 3
// must not replay R4 or R5.
std::string stale_record_after_clean_reopen(const std::string& dir) {
  SimFile f{dir + "/c.pm", UnitMode::kMsyncPages};
  const kv::StoreOptions o = one_log(kv::Durability::kAsync);
  const std::string big(3000, '.');
  std::vector<std::byte> image;
  {
    std::unique_ptr<Container> c = must_open(f.path, o, true, f.opener());
    std::unique_ptr<kv::Store> s = must_store(c.get(), o);
    EXPECT_TRUE(s->put("x", "0" + big).ok());
    EXPECT_TRUE(s->sync().ok());
    for (const char* k : {"a", "b", "x", "c"}) EXPECT_TRUE(s->put(k, "1" + big).ok());
    // Everything landed but the page holding R2's header (raw offset 3064,
    // after R1's 3064 bytes).
    image = read_file(f.path);
    const uint64_t page = (kHeapOffset + 3064) / 4096 * 4096;
    const std::vector<std::byte>& disk = f.sim->durable_image();
    std::memcpy(image.data() + page, disk.data() + page, 4096);
    s.reset();
    c.reset();
  }
  write_file(f.path, image);
  {
    std::unique_ptr<Container> c = must_open(f.path, o, false, open_pmem_file);
    std::unique_ptr<kv::Store> s = must_store(c.get(), o);
    EXPECT_EQ(get(*s, "x"), "0" + big);
    EXPECT_TRUE(s->put("a", "2" + big).ok());
    EXPECT_TRUE(s->put("x", "2" + big).ok());
    EXPECT_TRUE(s->checkpoint().ok());
  }
  {  // the close mark lost: the stale bytes under it are back
    std::vector<std::byte> now = read_file(f.path);
    uint32_t magic;
    for (size_t at = 0; at + 40 <= now.size() && at + 40 <= image.size(); at += 8) {
      std::memcpy(&magic, now.data() + at, 4);
      if (magic == kv::kCloseMagic) std::memcpy(now.data() + at, image.data() + at, 40);
    }
    write_file(f.path, now);
  }
  std::unique_ptr<Container> c = must_open(f.path, o, false, open_pmem_file);
  std::unique_ptr<kv::Store> s = must_store(c.get(), o);
  if (get(*s, "c") != "<none>") return "stale c";
  return get(*s, "x").substr(0, 1);
}

TEST(Issue11Defect2, StaleRecordsOfAnOlderSessionStayStaleAfterACleanReopen) {
  test::TempDir dir;
  EXPECT_EQ(stale_record_after_clean_reopen(dir.path()), "2");

  kv::g_kv_planted_bugs.session_rule_without_boundary = true;
  test::TempDir dir2;
  EXPECT_NE(stale_record_after_clean_reopen(dir2.path()), "2");
  kv::g_kv_planted_bugs = kv::KvPlantedBugs();
}

// --- Defect 3: recovered records were treated as durable.

// Session 1 (kAsync) logs A (synced) and B (a page and more, not synced);
// the process is killed: B is in the page cache only. Session 2 recovers B,
// then a kSync put of C returns; the power fails.
std::string kill_then_power_failure(const std::string& dir) {
  SimFile f{dir + "/c.pm", UnitMode::kMsyncPages};
  kv::StoreOptions o = one_log(kv::Durability::kAsync);
  std::vector<std::byte> page_cache, disk;
  {
    std::unique_ptr<Container> c = must_open(f.path, o, true, f.opener());
    std::unique_ptr<kv::Store> s = must_store(c.get(), o);
    EXPECT_TRUE(s->put("a", "A").ok());
    EXPECT_TRUE(s->sync().ok());
    EXPECT_TRUE(s->put("b", std::string(4000, 'B')).ok());
    page_cache = read_file(f.path);
    disk = f.sim->durable_image();
  }
  write_file(f.path, page_cache);  // the kill: no clean close ran
  o.durability = kv::Durability::kSync;
  std::vector<std::byte> crash;
  {
    std::unique_ptr<Container> c = must_open(f.path, o, false, f.opener(&disk));
    std::unique_ptr<kv::Store> s = must_store(c.get(), o);
    EXPECT_TRUE(s->put("c", "C").ok());  // acknowledged: durable
    crash = f.sim->durable_image();
  }
  write_file(f.path, crash);
  return recovered(f.path, o, "c");
}

TEST(Issue11Defect3, RecoveryMakesWhatItAcceptsDurable) {
  test::TempDir dir;
  EXPECT_EQ(kill_then_power_failure(dir.path()), "C");

  // With the bug, B's record is lost below where session 2 began: the open
  // refuses (the records past it were durable) rather than lose C silently.
  kv::g_kv_planted_bugs.recovery_trusts_page_cache = true;
  test::TempDir dir2;
  EXPECT_EQ(kill_then_power_failure(dir2.path()), "<corruption>");
  kv::g_kv_planted_bugs = kv::KvPlantedBugs();
}

// --- Defect 4: a commit whose write-back failed was silently dropped.

struct Root {
  uint64_t words[512];
};

// Commit 3's write-back fails (EIO from the flush that makes it durable:
// off pmem, the next commit's, which fails too); then the program goes on
// allocating, which grows the container; then the power fails. Returns the
// first word recovered ("2" is commit 3's).
uint64_t failed_writeback_then_growth(const std::string& dir, std::string* refused) {
  SimFile f{dir + "/c.pm", UnitMode::kMsyncPages};
  std::vector<std::byte> crash;
  {
    Result<std::unique_ptr<Container>> c = f.open(true);
    EXPECT_TRUE(c.ok());
    auto* r = static_cast<Root*>(*(*c)->alloc(sizeof(Root)));
    (*c)->will_write(r, sizeof *r);
    std::memset(r, 0, sizeof *r);
    r->words[0] = 1;
    EXPECT_TRUE((*c)->set_root(r).ok());
    EXPECT_TRUE((*c)->commit().ok());
    (*c)->will_write(r, sizeof *r);
    r->words[0] = 1;
    r->words[511] = 7;
    EXPECT_TRUE((*c)->commit().ok());  // the journal area has room now
    (*c)->will_write(r, sizeof *r);
    r->words[0] = 2;
    EXPECT_TRUE((*c)->commit().ok());  // its write-back waits for the next flush
    (*c)->will_write(r, sizeof *r);
    r->words[1] = 3;
    f.sim->fail_at(1);  // that flush: commit 4's journal with commit 3's write-back
    Status s = (*c)->commit();
    EXPECT_FALSE(s.ok());
    EXPECT_NE(s.message().find("reopen"), std::string::npos) << s.to_string();
    Result<void*> big = (*c)->alloc(8 << 20);  // needs growth
    *refused = big.ok() ? "alloc went on" : big.status().message();
    crash = f.sim->durable_image();
  }
  write_file(f.path, crash);
  Result<std::unique_ptr<Container>> c = f.open_real();
  EXPECT_TRUE(c.ok());
  return c.ok() ? (*c)->root<Root>()->words[0] : 0;
}

TEST(Issue11Defect4, AFailedWriteBackRefusesMutationsUntilReopenFinishesIt) {
  test::TempDir dir;
  std::string refused;
  EXPECT_EQ(failed_writeback_then_growth(dir.path(), &refused), 2u);
  EXPECT_NE(refused.find("writing the previous commit home"), std::string::npos) << refused;

  g_planted_bugs.mutate_after_failed_writeback = true;
  test::TempDir dir2;
  EXPECT_NE(failed_writeback_then_growth(dir2.path(), &refused), 2u);
  g_planted_bugs = PlantedBugs();
}

TEST(Issue11Defect4, EveryMutationIsRefusedAfterAFailedWriteBack) {
  test::TempDir dir;
  SimFile f{dir.file("c.pm"), UnitMode::kPmemLines};
  Result<std::unique_ptr<Container>> c = f.open(true);
  ASSERT_TRUE(c.ok());
  Container& k = **c;
  auto* p = static_cast<uint64_t*>(*k.alloc(64));
  ASSERT_TRUE(k.set_root(p).ok());
  ASSERT_TRUE(k.commit().ok());
  k.will_write(p, 8);
  *p = 5;
  ASSERT_TRUE(k.commit().ok());
  k.will_write(p, 8);
  *p = 6;
  f.sim->fail_at(2);
  ASSERT_FALSE(k.commit().ok());
  EXPECT_FALSE(k.alloc(16).ok());
  EXPECT_FALSE(k.free(p).ok());
  EXPECT_FALSE(k.set_root(nullptr).ok());
  EXPECT_FALSE(k.reserve(4 << 20).ok());
  EXPECT_FALSE(k.commit().ok());
  EXPECT_FALSE(k.abort().ok());
  EXPECT_FALSE(k.collect().ok());
  c->reset();
  Result<std::unique_ptr<Container>> again = f.open_real();
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*(*again)->root<uint64_t>(), 6u);
}

// --- Found while porting SQLite: a commit whose journal drain failed
// reported "nothing applied", but its header stayed in the page cache; a
// clean close marked it applied, but after a kill the next open replayed
// it (and SQLite had rolled that transaction back).

// A child commits 5, then tries 6 with the n-th sync failing, gives it up
// (abort) and is killed. Returns what the reopened root holds, or 0 when
// the commit did not fail before its commit point.
uint64_t failed_drain_then_kill(const std::string& dir, uint64_t n) {
  SimFile f{dir + "/d.pm", UnitMode::kMsyncPages};
  const pid_t pid = ::fork();
  if (pid == 0) {
    Result<std::unique_ptr<Container>> c = f.open(true);
    if (!c.ok()) ::_exit(1);
    Container& k = **c;
    auto* p = static_cast<uint64_t*>(*k.alloc(64));
    if (!k.set_root(p).ok()) ::_exit(2);
    k.will_write(p, 8);
    *p = 5;
    if (!k.commit().ok()) ::_exit(3);
    k.will_write(p, 8);
    *p = 6;
    f.sim->fail_at(n);
    Status s = k.commit();
    if (s.ok() || s.message().find("nothing applied") == std::string::npos) ::_exit(10);
    (void)k.abort();
    ::_exit(0);  // a kill: no destructor runs
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) == 10) return 0;
  if (WEXITSTATUS(status) != 0) return 100 + WEXITSTATUS(status);
  Result<std::unique_ptr<Container>> again = f.open_real();
  return again.ok() ? *(*again)->root<uint64_t>() : 4;
}

TEST(FailedJournalDrain, ACommitThatReportedFailureIsNeverReplayed) {
  int failed = 0;
  for (uint64_t n = 1; n <= 4; n++) {
    test::TempDir dir;
    const uint64_t v = failed_drain_then_kill(dir.path(), n);
    if (v == 0) continue;
    failed++;
    EXPECT_EQ(v, 5u) << "sync " << n << " failing";
  }
  EXPECT_GT(failed, 0);
  g_planted_bugs.keep_header_after_failed_drain = true;
  bool replayed = false;
  for (uint64_t n = 1; n <= 4; n++) {
    test::TempDir dir;
    replayed |= failed_drain_then_kill(dir.path(), n) == 6;
  }
  g_planted_bugs = PlantedBugs();
  EXPECT_TRUE(replayed) << "the planted bug went unseen";
}

// --- Fresh bytes (libpm/journal.h): a commit that fails before its commit
// point may already have written its new blocks home, where the next
// commit's diff cannot see them. They must stay in every later commit until
// one succeeds, through a second failure too (here: no file room for a
// large journal body).

// Commits a new block with the n-th sync failing, then with file growth
// refused, then for good; returns 0 when the durable image holds every
// byte, 1 when a byte is lost, 2 when the first commit did not fail before
// its commit point (nothing to check), 3 and up for a step that went wrong.
int fresh_after_two_failures(const std::string& dir, UnitMode mode, uint64_t n) {
  constexpr size_t kBlock = 192 << 10, kOld = 2 << 20;
  struct Root {
    std::byte* block;
    std::byte* old;
  };
  SimFile f{dir + "/f.pm", mode};
  {  // a session of its own, so that no commit's write-back is deferred
    Result<std::unique_ptr<Container>> c = f.open(true);
    if (!c.ok()) return 3;
    Container& k = **c;
    Result<Root*> root = k.make<Root>(Root{nullptr, nullptr});
    Result<void*> old = k.alloc(kOld);
    if (!root.ok() || !old.ok() || !k.set_root(*root).ok()) return 4;
    std::memset(*old, 0x11, kOld);
    (*root)->old = static_cast<std::byte*>(*old);
    k.will_write(*old, kOld);
    k.will_write(*root, sizeof(Root));
    if (!k.commit().ok()) return 5;
  }
  std::vector<std::byte> disk;
  {
    Result<std::unique_ptr<Container>> c = f.open(false);
    if (!c.ok()) return 3;
    Container& k = **c;
    Root* root = k.root<Root>();
    Result<void*> block = k.alloc(kBlock);
    if (!block.ok()) return 6;
    std::memset(*block, 0x5a, kBlock);
    k.will_write(*block, kBlock);
    k.will_write(root, sizeof(Root));
    root->block = static_cast<std::byte*>(*block);
    f.sim->fail_at(n);
    Status s = k.commit();
    if (s.ok() || s.message().find("nothing applied") == std::string::npos) return 2;
    // The old block rewritten whole: a body larger than the journal's room.
    std::memset(root->old, 0x22, kOld);
    k.will_write(root->old, kOld);
    SimPersist::set_file_limit(f.sim->durable_image().size());
    s = k.commit();
    SimPersist::set_file_limit(0);
    if (s.code() != Code::kNoSpace) return 7;
    if (!k.commit().ok()) return 8;
    disk = f.sim->durable_image();
  }
  write_file(f.path, disk);  // a power failure after the third commit
  Result<std::unique_ptr<Container>> c = f.open_real();
  if (!c.ok()) return 9;
  const Root* root = (*c)->root<Root>();
  if (root == nullptr || root->block == nullptr || root->old == nullptr) return 1;
  for (size_t i = 0; i < kBlock; i++) {
    if (root->block[i] != std::byte{0x5a}) return 1;
  }
  for (size_t i = 0; i < kOld; i++) {
    if (root->old[i] != std::byte{0x22}) return 1;
  }
  return 0;
}

TEST(FreshBytes, ABlockWhoseCommitFailedTwiceIsWholeAfterTheThird) {
  for (UnitMode mode : {UnitMode::kPmemLines, UnitMode::kMsyncPages}) {
    int checked = 0;
    bool lost = false;
    for (uint64_t n = 1; n <= 4; n++) {
      test::TempDir dir;
      const int r = fresh_after_two_failures(dir.path(), mode, n);
      if (r == 2) continue;
      checked++;
      EXPECT_EQ(r, 0) << "sync " << n << " failing, mode " << static_cast<int>(mode);
    }
    EXPECT_GT(checked, 0) << "no sync failed before the commit point";
    g_planted_bugs.fresh_retry_forgotten = true;
    for (uint64_t n = 1; n <= 4; n++) {
      test::TempDir dir;
      lost |= fresh_after_two_failures(dir.path(), mode, n) == 1;
    }
    g_planted_bugs = PlantedBugs();
    EXPECT_TRUE(lost) << "the planted bug went unseen, mode " << static_cast<int>(mode);
  }
}

// A block of n bytes of 0x5a, allocated and pointed to by the root (a
// void*): 0, or 6 when it is not the block *first (unless null), 5 when
// none is allocated. *first becomes the block.
int root_block(Container& k, size_t n, void** first) {
  Result<void*> block = k.alloc(n);
  if (!block.ok()) return 5;
  if (*first != nullptr && *block != *first) return 6;  // the tests need the same block
  *first = *block;
  std::memset(*block, 0x5a, n);
  k.will_write(*block, n);
  void** r = k.root<void*>();
  k.will_write(r, sizeof(void*));
  *r = *block;
  return 0;
}

// After a power failure that left `disk`: 0 when the root's block of n
// bytes is whole, 1 when not, 10 when the file does not open.
int root_block_whole(const SimFile& f, const std::vector<std::byte>& disk, size_t n) {
  write_file(f.path, disk);
  Result<std::unique_ptr<Container>> c = f.open_real();
  if (!c.ok()) return 10;
  const std::byte* block = *(*c)->root<std::byte*>();
  if (block == nullptr) return 1;
  for (size_t i = 0; i < n; i++) {
    if (block[i] != std::byte{0x5a}) return 1;
  }
  return 0;
}

// After abort() the working view reads the file again, fresh bytes of the
// failed commit included, which are not durable there: the next commit
// takes them again. Else the same block allocated again and written with
// the same bytes (a store replaying its logs after the abort) leaves the
// diff empty, and a power failure after that commit loses them (found by
// faults_kvstore_async_pmem). 0: the block is whole after the power
// failure; 1: it is not; else the step that went wrong.
int fresh_after_failure_and_abort(const std::string& dir) {
  constexpr size_t kBlock = 192 << 10;
  SimFile f{dir + "/a.pm", UnitMode::kPmemLines};
  std::vector<std::byte> disk;
  {
    Result<std::unique_ptr<Container>> c = f.open(true);
    if (!c.ok()) return 3;
    Container& k = **c;
    Result<void**> root = k.make<void*>(nullptr);
    if (!root.ok() || !k.set_root(*root).ok() || !k.commit().ok()) return 4;
    void* first = nullptr;
    if (int r = root_block(k, kBlock, &first); r != 0) return r;
    f.sim->fail_at(1);
    if (k.commit().ok()) return 7;
    if (!k.abort().ok()) return 8;
    if (int r = root_block(k, kBlock, &first); r != 0) return r;
    if (!k.commit().ok()) return 9;
    disk = f.sim->durable_image();
  }
  return root_block_whole(f, disk, kBlock);  // a power failure after the commit
}

// The same across sessions: the failed commit's container is closed (no
// abort, no commit), and the next session, on the file the page cache
// holds and a disk without those bytes, writes the same block again. The
// close writes them again; else that commit's diff is empty. With
// `planted`, the close leaves them. 0, 1, or the step, as above.
int fresh_after_failure_and_close(const std::string& dir, bool planted) {
  constexpr size_t kBlock = 192 << 10;
  SimFile f{dir + "/a.pm", UnitMode::kPmemLines};
  std::vector<std::byte> disk;
  void* first = nullptr;
  for (int session = 0; session < 2; session++) {
    const std::vector<std::byte> durable = disk;
    Result<std::unique_ptr<Container>> c =
        open_container(f.path, small_container_options(), session == 0,
                       f.opener(session == 0 ? nullptr : &durable));
    if (!c.ok()) return 3;
    Container& k = **c;
    f.sim->on_close([&](const SimPersist& sp) { disk = sp.durable_image(); });
    if (session == 0) {
      Result<void**> root = k.make<void*>(nullptr);
      if (!root.ok() || !k.set_root(*root).ok() || !k.commit().ok()) return 4;
    }
    if (int r = root_block(k, kBlock, &first); r != 0) return r;
    if (session == 0) {
      f.sim->fail_at(1);
      if (k.commit().ok()) return 7;
      g_planted_bugs.close_forgets_fresh_retry = planted;
    } else if (!k.commit().ok()) {
      return 9;
    }
    c->reset();
    g_planted_bugs.close_forgets_fresh_retry = false;
  }
  return root_block_whole(f, disk, kBlock);  // a power failure after the second session
}

TEST(FreshBytes, AClosedContainerWritesWhatAFailedCommitWroteHomeAgain) {
  {
    test::TempDir dir;
    EXPECT_EQ(fresh_after_failure_and_close(dir.path(), false), 0);
  }
  test::TempDir dir;
  EXPECT_EQ(fresh_after_failure_and_close(dir.path(), true), 1) << "the planted bug went unseen";
}

TEST(FreshBytes, AnAbortKeepsWhatAFailedCommitWroteHomeForTheNextCommit) {
  {
    test::TempDir dir;
    EXPECT_EQ(fresh_after_failure_and_abort(dir.path()), 0);
  }
  test::TempDir dir;
  g_planted_bugs.abort_forgets_fresh_retry = true;
  const int planted = fresh_after_failure_and_abort(dir.path());
  g_planted_bugs = PlantedBugs();
  EXPECT_EQ(planted, 1) << "the planted bug went unseen";
}

// --- Defect 5: a full disk killed the process with SIGBUS.

// In a child process: SIGBUS exits 99 (our own handler, so that the answer
// is the same under ASan, which would report the signal and exit 1), and a
// 16 MiB tmpfs in a mount namespace of its own. Its path, or "" when none
// can be had (not root).
std::string small_private_tmpfs() {
  struct sigaction sa {};
  sa.sa_handler = [](int) { ::_exit(99); };
  ::sigaction(SIGBUS, &sa, nullptr);
  return pm::test::private_small_tmpfs();
}

// In a child with its own mount namespace and a small tmpfs: create a
// store, fill the file system, then put and checkpoint. Exit codes: 0 all
// good, 77 no tmpfs to be had (not root), 99 SIGBUS, else the step that
// went wrong.
int full_disk_child(bool sparse) {
  const std::string dir = small_private_tmpfs();
  if (dir.empty()) return 77;
  g_planted_bugs.sparse_file = sparse;
  const std::string path = dir + "/kv.pm";
  kv::StoreOptions o = one_log(kv::Durability::kSync);
  o.log_bytes = 4 << 20;
  o.initial_heap_bytes = 2 << 20;
  // Their values outgrow the heap made at create (new values go home
  // without the journal, so the journal's room alone would not run out).
  constexpr int kKeys = 3000;
  Result<std::unique_ptr<kv::Store>> s = kv::Store::open(path, o);
  if (!s.ok()) return 10;
  // Fill what is left.
  const std::string filler = dir + "/filler";
  pm::test::fill_file_system(filler);
  // Puts only need their log's space, reserved at create.
  for (int i = 0; i < kKeys; i++) {
    if (!(*s)->put("key" + std::to_string(i), std::string(1000, 'v')).ok()) return 11;
  }
  // Applying them needs heap space: an error, not a signal.
  kv::Status cp = (*s)->checkpoint();
  if (cp.ok() || cp.code() != Code::kNoSpace) {
    std::fprintf(stderr, "checkpoint on a full disk: %s\n", cp.to_string().c_str());
    return 12;
  }
  if (get(**s, "key7") != std::string(1000, 'v')) return 13;
  s->reset();
  ::unlink(filler.c_str());
  s = kv::Store::open(path, o);
  if (!s.ok()) return 14;
  for (int i = 0; i < kKeys; i++) {
    if (get(**s, "key" + std::to_string(i)) != std::string(1000, 'v')) return 15;
  }
  if (!(*s)->checkpoint().ok()) return 16;
  // A container that cannot get its space is not created at all.
  pm::test::fill_file_system(filler);
  Options big;
  big.initial_size = 64 << 20;
  Result<std::unique_ptr<Container>> c = Container::create(dir + "/big.pm", big);
  if (c.ok() || c.status().code() != Code::kNoSpace) return 17;
  if (::access((dir + "/big.pm").c_str(), F_OK) == 0) return 18;
  return 0;
}

int run_full_disk(bool sparse, int* signal) {
  pid_t pid = ::fork();
  if (pid == 0) ::_exit(full_disk_child(sparse));
  int status = 0;
  ::waitpid(pid, &status, 0);
  *signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(Issue11Defect5, AFullDiskGivesErrorsNotSigbus) {
  int sig = 0;
  const int code = run_full_disk(false, &sig);
  if (code == 77) GTEST_SKIP() << "no private tmpfs here (needs root)";
  EXPECT_EQ(sig, 0) << strsignal(sig);
  EXPECT_EQ(code, 0) << (code == 99 ? "SIGBUS" : "a step failed");

  EXPECT_EQ(run_full_disk(true, &sig), 99) << "the sparse file should have raised SIGBUS";
}

// A sparse copy of a container (cp --sparse=always, tar -S, rsync -S) on a
// full disk: touching a hole through the mapping needs a page (on tmpfs
// even to read it), and there was none: SIGBUS at the first read, even
// for `pm info`. An open now fills the holes or says there is no room.
// Exit codes as full_disk_child's.
int sparse_copy_child() {
  const std::string dir = small_private_tmpfs();
  if (dir.empty()) return 77;
  const std::string made = dir + "/made.pm", copy = dir + "/copy.pm";
  {
    Options o;
    o.initial_size = 8 << 20;
    Result<std::unique_ptr<Container>> c = Container::create(made, o);
    if (!c.ok()) return 10;
    auto* p = static_cast<char*>(*(*c)->alloc(4 << 20));
    (*c)->will_write(p, 4 << 20);
    std::memset(p, 'x', 4 << 20);
    if (!(*c)->set_root(p).ok() || !(*c)->commit().ok()) return 11;
  }
  // The copy skips every 64 KiB block of zeros, as cp --sparse=always.
  const int in = ::open(made.c_str(), O_RDONLY), out = ::open(copy.c_str(), O_WRONLY | O_CREAT, 0600);
  std::vector<char> block(1 << 16);
  ssize_t n = 0;
  off_t at = 0;
  while ((n = ::read(in, block.data(), block.size())) > 0) {
    if (std::any_of(block.begin(), block.begin() + n, [](char c) { return c != 0; })) {
      if (::pwrite(out, block.data(), static_cast<size_t>(n), at) != n) return 12;
    }
    at += n;
  }
  if (::ftruncate(out, at) != 0) return 13;
  ::close(in);
  ::close(out);
  ::unlink(made.c_str());
  const std::string filler = dir + "/filler";
  pm::test::fill_file_system(filler);
  Result<std::unique_ptr<Container>> c = Container::open(copy);
  if (c.ok() || c.status().code() != Code::kNoSpace) return 14;
  if (c.status().message().find("holes") == std::string::npos) return 15;
  Options ro;
  ro.read_only = true;
  c = Container::open(copy, ro);
  if (c.ok() || c.status().code() != Code::kNoSpace) return 16;
  ::unlink(filler.c_str());
  c = Container::open(copy);
  if (!c.ok()) return 17;
  const char* p = (*c)->root<char>();
  if (p == nullptr || p[0] != 'x' || p[(4 << 20) - 1] != 'x' || !(*c)->check().problems.empty()) {
    return 18;
  }
  return 0;
}

TEST(FullDisk, ASparseCopyOfAContainerOpensOrSaysThereIsNoRoom) {
  pid_t pid = ::fork();
  if (pid == 0) ::_exit(sparse_copy_child());
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status)) << strsignal(WTERMSIG(status));
  if (WEXITSTATUS(status) == 77) GTEST_SKIP() << "no private tmpfs here (needs root)";
  EXPECT_EQ(WEXITSTATUS(status), 0) << (WEXITSTATUS(status) == 99 ? "SIGBUS" : "a step failed");
}

}  // namespace
}  // namespace pm::crash
