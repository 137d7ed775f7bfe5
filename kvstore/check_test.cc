// Damaged stores: reads fail cleanly (no crash, no loop, no value that was
// never written), check_store names the damage, salvage copies the rest.
// And the robustness defects of issue 17 that are not about damage.
#include "kv/check.h"

#include <gtest/gtest.h>
#include <malloc.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <thread>

#include "kvstore/backend.h"
#include "kvstore/frontend.h"
#include "kvstore/planted_bugs.h"
#include "kvstore/recovery.h"
#include "kvstore/store_impl.h"
#include "libpm/container_impl.h"
#include "libpm/persist.h"
#include "testutil/child.h"
#include "testutil/container_util.h"
#include "testutil/store_options.h"
#include "testutil/temp_dir.h"

namespace kv {
namespace {

StoreOptions small(bool background = false) {
  StoreOptions o = pm::test::small_store_options();
  o.log_bytes = 256 << 10;
  o.initial_heap_bytes = 4 << 20;
  o.background = background;
  return o;
}

std::unique_ptr<Store> must(Result<std::unique_ptr<Store>> r) {
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  return r.ok() ? std::move(*r) : nullptr;
}

// A store with 200 keys in the backend and 20 more in the logs.
void make_store(const std::string& path) {
  auto s = must(Store::open(path, small()));
  for (int i = 0; i < 200; i++) ASSERT_TRUE(s->put("k" + std::to_string(i), "v" + std::to_string(i)).ok());
  ASSERT_TRUE(s->checkpoint().ok());
  for (int i = 200; i < 220; i++) ASSERT_TRUE(s->put("k" + std::to_string(i), "w").ok());
}

// Opens the container and damages the backend entry of `key` with fn (a
// committed change, as damage on disk would be).
void damage(const std::string& path, const std::string& key,
            const std::function<void(BackendEntry* e, BackendRoot* r)>& fn) {
  pm::Options o;
  o.tracker = pm::TrackerKind::kHints;
  auto c = pm::test::must(pm::Container::open(path, o));
  ASSERT_TRUE(c != nullptr);
  auto* r = c->root<BackendRoot>();
  const uint64_t b = bucket_for(*r, hash_key(key));
  BackendEntry* e = r->segs[b / kSegBuckets][b % kSegBuckets];
  while (!is_chain_end(e) && entry_key(e) != key) e = e->next;
  ASSERT_FALSE(is_chain_end(e)) << key;
  c->will_write(e, sizeof *e + entry_key_len(e) + e->vlen);
  fn(e, r);
  ASSERT_TRUE(c->commit().ok());
}

// Every way of reading the store: none may crash or hang.
struct Reads {
  Status get, scan, stats_ok;
  std::map<std::string, std::string> seen;
};

Reads read_everything(const std::string& path, const std::string& key) {
  Reads r;
  auto s = must(Store::open(path, small()));
  if (s == nullptr) return r;
  std::string v;
  r.get = s->get(key, &v);
  r.scan = s->scan("", [&](std::string_view k, std::string_view v) {
    r.seen.emplace(k, v);
    return true;
  });
  (void)s->stats();
  return r;
}

TEST(DamagedStoreTest, AnOversizedValueLengthIsCorruptionNotACrash) {
  pm::test::TempDir dir;
  const std::string path = dir.file("s.pm");
  make_store(path);
  damage(path, "k7", [](BackendEntry* e, BackendRoot*) { e->vlen = 0x40000000; });
  Reads r = read_everything(path, "k7");
  EXPECT_TRUE(r.get.is_corruption()) << r.get.to_string();
  EXPECT_TRUE(r.scan.is_corruption()) << r.scan.to_string();

  auto c = pm::test::must(pm::Container::open(path));
  Result<StoreCheck> ck = check_store(c.get());
  ASSERT_TRUE(ck.ok());
  ASSERT_FALSE(ck->problems.empty());
  EXPECT_NE(ck->problems[0].find("value length"), std::string::npos) << ck->problems[0];
}

TEST(DamagedStoreTest, AFlippedValueByteFailsTheChecksumInsteadOfReadingBack) {
  pm::test::TempDir dir;
  const std::string path = dir.file("s.pm");
  make_store(path);
  damage(path, "k9", [](BackendEntry* e, BackendRoot*) { e->data[entry_key_len(e)] ^= 1; });
  Reads r = read_everything(path, "k9");
  EXPECT_TRUE(r.get.is_corruption()) << r.get.to_string();
  EXPECT_TRUE(r.scan.is_corruption());
  for (const auto& [k, v] : r.seen) EXPECT_NE(v, "w9") << "read a value never written";

  auto c = pm::test::must(pm::Container::open(path));
  Result<StoreCheck> ck = check_store(c.get());
  ASSERT_TRUE(ck.ok());
  ASSERT_EQ(ck->problems.size(), 1u);
  EXPECT_NE(ck->problems[0].find("checksum"), std::string::npos) << ck->problems[0];
}

// A scan reads keys in batches; a damaged value must fail the read at its
// key, not take the readable keys of its batch before it down with it, nor
// fail a scan that stopped before reaching it.
TEST(DamagedStoreTest, AScanThatMeetsADamagedValueDeliversEveryKeyBeforeIt) {
  pm::test::TempDir dir;
  const std::string path = dir.file("s.pm");
  make_store(path);
  damage(path, "k5", [](BackendEntry* e, BackendRoot*) { e->data[entry_key_len(e)] ^= 1; });
  std::vector<std::string> before;  // the keys that sort before "k5"
  for (int i = 0; i < 220; i++) {
    if ("k" + std::to_string(i) < "k5") before.push_back("k" + std::to_string(i));
  }
  std::sort(before.begin(), before.end());
  auto s = must(Store::open(path, small()));
  ASSERT_TRUE(s != nullptr);

  std::vector<std::string> seen;
  Status st = s->scan("", [&](std::string_view k, std::string_view) {
    seen.emplace_back(k);
    return true;
  });
  EXPECT_TRUE(st.is_corruption()) << st.to_string();
  EXPECT_EQ(seen, before);

  // Stopped before the damage (by fn, and by a limit): no error.
  seen.clear();
  st = s->scan("k3", "", 0, [&](std::string_view k, std::string_view) {
    seen.emplace_back(k);
    return false;
  });
  EXPECT_TRUE(st.ok()) << st.to_string();
  EXPECT_EQ(seen, std::vector<std::string>{"k3"});
  EXPECT_TRUE(s->scan("k3", "", 1, [](std::string_view, std::string_view) { return true; }).ok());

  // The iterator: every key before it, then the error.
  auto it = s->iterator();
  seen.clear();
  for (it->seek(""); it->valid(); it->next()) seen.emplace_back(it->key());
  EXPECT_TRUE(it->status().is_corruption()) << it->status().to_string();
  EXPECT_EQ(seen, before);
  seen.clear();  // a seek past it reads on
  for (it->seek("k50"); it->valid(); it->next()) seen.emplace_back(it->key());
  EXPECT_TRUE(it->status().ok()) << it->status().to_string();
  EXPECT_FALSE(seen.empty());
}

// A flipped byte in a key: its entry no longer matches the key, and the
// miss must not be taken for an answer ("no such key"), nor a scan pass
// over it (a scan reads each key its index holds from the table).
TEST(DamagedStoreTest, AFlippedKeyByteIsCorruptionNotAMissingKey) {
  pm::test::TempDir dir;
  const std::string path = dir.file("s.pm");
  make_store(path);
  damage(path, "k9", [](BackendEntry* e, BackendRoot*) { e->data[0] = 'X'; });
  Reads r = read_everything(path, "k9");
  EXPECT_TRUE(r.get.is_corruption()) << r.get.to_string();
  EXPECT_TRUE(r.scan.is_corruption()) << r.scan.to_string();
}

// The same for a flipped bit in a key's length: the entry reads as a
// shorter key (the checksum covers the length, but a miss reads no entry's
// checksum).
TEST(DamagedStoreTest, AFlippedKeyLengthIsCorruptionNotAMissingKey) {
  pm::test::TempDir dir;
  const std::string path = dir.file("s.pm");
  make_store(path);
  damage(path, "k19", [](BackendEntry* e, BackendRoot*) { e->klen ^= 1; });  // "k1"
  Reads r = read_everything(path, "k19");
  EXPECT_TRUE(r.get.is_corruption()) << r.get.to_string();
  EXPECT_TRUE(r.scan.is_corruption()) << r.scan.to_string();
}

// A zeroed heap bitmap reads as free granules: a store that allocated
// there would write new entries over live ones. Every old key must read
// back as written or fail, whatever the writes after the damage did.
TEST(DamagedStoreTest, AZeroedHeapBitmapIsNotWrittenOver) {
  pm::test::TempDir dir;
  const std::string path = dir.file("s.pm");
  make_store(path);
  {
    pm::Options o;
    o.tracker = pm::TrackerKind::kHints;
    auto c = pm::test::must(pm::Container::open(path, o));
    ASSERT_TRUE(c != nullptr);
    auto* r = c->root<BackendRoot>();
    const uint64_t b = bucket_for(*r, hash_key("k7"));
    BackendEntry* e = r->segs[b / kSegBuckets][b % kSegBuckets];
    while (!is_chain_end(e) && entry_key(e) != "k7") e = e->next;
    ASSERT_FALSE(is_chain_end(e));
    pm::GranuleBits* bits = pm::test::granule_bits_for(c.get(), e);
    c->will_write(bits, sizeof *bits);
    std::memset(bits, 0, sizeof *bits);
    ASSERT_TRUE(c->commit().ok());
  }
  Status failed;
  {
    Result<std::unique_ptr<Store>> s = Store::open(path, small());
    if (s.ok()) {
      for (int i = 0; i < 400 && failed.ok(); i++) {
        failed = (*s)->put("n" + std::to_string(i), std::string(40, 'n'));
      }
      if (failed.ok()) failed = (*s)->checkpoint();
    } else {
      failed = s.status();
    }
  }
  EXPECT_TRUE(failed.is_corruption()) << failed.to_string();
  EXPECT_NE(failed.to_string().find("run 'pm check'"), std::string::npos) << failed.to_string();
  Result<std::unique_ptr<Store>> s = Store::open(path, small());
  if (!s.ok()) return;  // refusing it loses nothing either
  for (int i = 0; i < 200; i++) {
    std::string v;
    Status g = (*s)->get("k" + std::to_string(i), &v);
    if (g.ok()) {
      EXPECT_EQ(v, "v" + std::to_string(i)) << "k" << i;
    }
  }
}

TEST(DamagedStoreTest, AChainCycleEndsReadsInsteadOfLooping) {
  pm::test::TempDir dir;
  const std::string path = dir.file("s.pm");
  make_store(path);
  uint64_t bucket = 0;
  damage(path, "k11", [&](BackendEntry* e, BackendRoot* r) {
    e->next = e;
    bucket = bucket_for(*r, hash_key("k11"));
  });
  // An absent key of the same bucket: its get walks the cycle.
  std::string absent;
  {
    auto c = pm::test::must(pm::Container::open(path));
    const BackendRoot& r = *c->root<BackendRoot>();
    for (int i = 0; absent.empty(); i++) {
      const std::string k = "absent" + std::to_string(i);
      if (bucket_for(r, hash_key(k)) == bucket) absent = k;
    }
  }
  Reads r = read_everything(path, absent);
  EXPECT_TRUE(r.get.is_corruption()) << r.get.to_string();
  // A scan reads the keys the index lists, each by a get: it ends, and any
  // key whose get meets the cycle makes it fail.
  EXPECT_TRUE(r.scan.ok() || r.scan.is_corruption()) << r.scan.to_string();
  EXPECT_LE(r.seen.size(), 220u);

  auto c = pm::test::must(pm::Container::open(path));
  Result<StoreCheck> ck = check_store(c.get());
  ASSERT_TRUE(ck.ok());
  ASSERT_FALSE(ck->problems.empty());
  EXPECT_NE(ck->problems[0].find("loops"), std::string::npos) << ck->problems[0];
}

// Chains end in a mark naming their bucket, so a link zeroed by damage (the
// entries' checksums do not cover links) is corruption, not the chain's end:
// before, the keys after it read as missing, and a put of one of them linked
// a second entry there.
TEST(DamagedStoreTest, AZeroedChainLinkIsCorruptionNotAMissingKey) {
  for (const bool head : {false, true}) {
    SCOPED_TRACE(head ? "the bucket's head" : "a link in the chain");
    pm::test::TempDir dir;
    const std::string path = dir.file("s.pm");
    make_store(path);
    std::string behind;  // a key after k11 in k11's chain
    {
      auto c = pm::test::must(pm::Container::open(path));
      const BackendRoot& r = *c->root<BackendRoot>();
      const uint64_t b = bucket_for(r, hash_key("k11"));
      for (int i = 0; behind.empty(); i++) {
        const std::string k = "behind" + std::to_string(i);
        if (bucket_for(r, hash_key(k)) == b) behind = k;
      }
    }
    {
      auto s = must(Store::open(path, small()));
      ASSERT_TRUE(s->put(behind, "hidden?").ok());  // new keys go to the chain's end
      ASSERT_TRUE(s->checkpoint().ok());
    }
    if (head) {
      pm::Options o;
      o.tracker = pm::TrackerKind::kHints;
      auto c = pm::test::must(pm::Container::open(path, o));
      auto* r = c->root<BackendRoot>();
      const uint64_t b = bucket_for(*r, hash_key("k11"));
      BackendEntry** slot = &r->segs[b / kSegBuckets][b % kSegBuckets];
      c->will_write(slot, sizeof *slot);
      *slot = nullptr;
      ASSERT_TRUE(c->commit().ok());
    } else {
      damage(path, "k11", [](BackendEntry* e, BackendRoot*) { e->next = nullptr; });
    }
    Reads r = read_everything(path, behind);
    EXPECT_TRUE(r.get.is_corruption()) << r.get.to_string();
    EXPECT_NE(r.get.to_string().find("bucket"), std::string::npos) << r.get.to_string();
    EXPECT_TRUE(r.scan.is_corruption()) << r.scan.to_string();
    {
      auto s = must(Store::open(path, small()));
      ASSERT_NE(s, nullptr);
      EXPECT_TRUE(s->put(behind, "again").is_corruption() || !s->checkpoint().ok())
          << "a put must not link a second entry of the key at the damage";
    }
    auto c = pm::test::must(pm::Container::open(path));
    Result<StoreCheck> ck = check_store(c.get());
    ASSERT_TRUE(ck.ok());
    bool named = false;
    for (const std::string& p : ck->problems) {
      named |= p.find("damaged link (zeroed)") != std::string::npos;
    }
    EXPECT_TRUE(named) << (ck->problems.empty() ? "no problem found" : ck->problems[0]);
  }
}

// A version 3 store (chains end in 0) opens read-only as it is, and its
// first writable open marks every chain's end (format 4).
TEST(DamagedStoreTest, AVersionThreeStoreGetsItsChainEndsMarkedAtItsFirstWritableOpen) {
  pm::test::TempDir dir;
  const std::string path = dir.file("s.pm");
  make_store(path);
  {  // back to format 3
    pm::Options o;
    o.tracker = pm::TrackerKind::kHints;
    auto c = pm::test::must(pm::Container::open(path, o));
    auto* r = c->root<BackendRoot>();
    const uint64_t buckets = (kSegBuckets << r->level) + r->split;
    for (uint64_t b = 0; b < buckets; b++) {
      BackendEntry** link = &r->segs[b / kSegBuckets][b % kSegBuckets];
      while (!is_chain_end(*link)) link = &(*link)->next;
      ASSERT_EQ(*link, chain_end(b));
      c->will_write(link, sizeof *link);
      *link = nullptr;
    }
    c->will_write(r, sizeof *r);
    r->version = 3;
    r->flags &= ~kChainEndsMarked;
    ASSERT_TRUE(c->commit().ok());
  }
  auto read_all = [&](bool read_only) {
    StoreOptions o = small();
    o.read_only = read_only;
    auto s = must(Store::open(path, o));
    ASSERT_NE(s, nullptr);
    for (int i = 0; i < 220; i++) {
      std::string v;
      ASSERT_TRUE(s->get("k" + std::to_string(i), &v).ok()) << i;
    }
  };
  read_all(true);
  {
    auto c = pm::test::must(pm::Container::open(path));
    EXPECT_EQ(c->root<BackendRoot>()->version, 3u) << "a read-only open changes nothing";
  }
  read_all(false);
  auto c = pm::test::must(pm::Container::open(path));
  const BackendRoot& r = *c->root<BackendRoot>();
  EXPECT_EQ(r.version, kBackendVersion);
  EXPECT_NE(r.flags & kChainEndsMarked, 0u);
  Result<StoreCheck> ck = check_store(c.get());
  ASSERT_TRUE(ck.ok());
  EXPECT_TRUE(ck->problems.empty()) << ck->problems.front();
}

TEST(DamagedStoreTest, AHealthyStoreChecksClean) {
  pm::test::TempDir dir;
  const std::string path = dir.file("s.pm");
  make_store(path);
  {
    auto s = must(Store::open(path, small()));
    for (int i = 0; i < 50; i++) ASSERT_TRUE(s->remove("k" + std::to_string(i)).ok());
    ASSERT_TRUE(s->checkpoint().ok());
    ASSERT_TRUE(s->put("late", "in the log").ok());
  }
  auto c = pm::test::must(pm::Container::open(path));
  Result<StoreCheck> ck = check_store(c.get());
  ASSERT_TRUE(ck.ok());
  EXPECT_TRUE(ck->problems.empty()) << ck->problems[0];
  EXPECT_EQ(ck->keys, 170u);
  EXPECT_GE(ck->log_records, 1u);
}

TEST(DamagedStoreTest, SalvageCopiesEveryReadableKeyAndNamesTheRest) {
  pm::test::TempDir dir;
  const std::string path = dir.file("s.pm"), out = dir.file("saved.pm");
  make_store(path);
  uint64_t source_seq;
  {
    auto s = must(Store::open(path, small()));
    source_seq = s->next_seq();
  }
  damage(path, "k5", [](BackendEntry* e, BackendRoot*) { e->data[entry_key_len(e)] ^= 1; });
  Result<SalvageReport> rep = salvage(path, out);
  ASSERT_TRUE(rep.ok()) << rep.status().to_string();
  EXPECT_EQ(rep->damaged_entries, 1u);
  EXPECT_EQ(rep->keys, 219u);
  EXPECT_EQ(rep->from_logs, 20u);
  {
    auto s = must(Store::open(out, small()));
    std::string v;
    EXPECT_TRUE(s->get("k5", &v).is_not_found());
    ASSERT_TRUE(s->get("k6", &v).ok());
    EXPECT_EQ(v, "v6");
    ASSERT_TRUE(s->get("k210", &v).ok());
    EXPECT_EQ(v, "w");
    // Its numbers go on from the source's: a number the source handed out
    // (the mount's clean-end mark holds one) never matches the copy's.
    EXPECT_GE(s->next_seq(), source_seq + rep->keys);
  }
  auto c = pm::test::must(pm::Container::open(out));
  Result<StoreCheck> ck = check_store(c.get());
  ASSERT_TRUE(ck.ok());
  EXPECT_TRUE(ck->problems.empty());
  EXPECT_FALSE(salvage(path, out).ok()) << "salvage must not overwrite a file";
}

// Salvage leaves its source as it was (a read-only open) and publishes the
// copy only once complete: a stopped one leaves `.salvaging`, which the
// next salvage names instead of building on.
TEST(DamagedStoreTest, SalvageWritesNothingToItsSourceAndPublishesOnlyAWholeCopy) {
  pm::test::TempDir dir;
  const std::string path = dir.file("s.pm"), out = dir.file("saved.pm");
  make_store(path);
  auto bytes = [](const std::string& p) {
    std::ifstream f(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(f), {});
  };
  const std::string before = bytes(path);
  ASSERT_TRUE(salvage(path, out).ok());
  EXPECT_TRUE(bytes(path) == before) << "salvage wrote to its source";
  struct stat st;
  EXPECT_NE(::stat((out + ".salvaging").c_str(), &st), 0);
  const std::string out2 = dir.file("again.pm");
  std::ofstream(out2 + ".salvaging") << "left by a stopped salvage";
  Result<SalvageReport> rep = salvage(path, out2);
  EXPECT_EQ(rep.status().code(), pm::Code::kInvalidArgument);
  EXPECT_NE(rep.status().message().find("stopped"), std::string::npos) << rep.status().to_string();
  EXPECT_NE(::stat(out2.c_str(), &st), 0);
}

// The store at `path` holds a damaged log record: the open must refuse
// (kCorruption, naming salvage) and check must report it. "" when both
// do; "opened" when the open went through.
std::string open_refused_and_check_reports(const std::string& path) {
  Result<std::unique_ptr<Store>> s = Store::open(path, small());
  if (s.ok()) return "opened";
  if (s.status().code() != pm::Code::kCorruption ||
      s.status().message().find("salvage") == std::string::npos) {
    return "open: " + s.status().to_string();
  }
  {
    auto c = pm::test::must(pm::Container::open(path));
    Result<StoreCheck> ck = check_store(c.get());
    if (!ck.ok() || ck->problems.empty()) return "pm check found no problem";
  }
  return "";
}

// A record damaged in the logs of a store closed cleanly. Recovery ends a
// log at its first record that does not read, which after a crash is the
// torn end of what was written; here the records after it were durable (the
// session's close mark lies beyond them) and would have been dropped
// silently: the open must refuse, check must name it, salvage must copy
// them. Returns the first problem, "" when none.
std::string damaged_log_record_is_reported(const std::string& path, const std::string& out) {
  make_store(path);  // closed cleanly: 20 puts in the logs, then the close marks
  std::string hit;
  {
    auto c = pm::test::must(pm::Container::open(path));
    const BackendRoot& r = *c->root<BackendRoot>();
    const Limits lim{r.max_key, r.max_value, r.log_bytes / 4};
    for (uint32_t i = 0; i < r.nlogs && hit.empty(); i++) {
      Log log(&c->raw(), i, uint64_t{i} * r.log_bytes, r.log_bytes);
      std::vector<std::pair<uint64_t, std::string>> recs;
      accepted_records(r, false, i, log, lim, [&](const Record& rec, uint64_t pos) {
        recs.push_back({pos, std::string(rec.ops[0].key)});
      });
      if (recs.size() < 3) continue;
      // The first byte of the second record's key.
      const uint64_t off = uint64_t{i} * r.log_bytes + recs[1].first % r.log_bytes +
                           sizeof(RecordHeader) + sizeof(OpHeader);
      char b;
      if (!c->raw().read(off, &b, 1).ok()) return "cannot read the log";
      b ^= 0x20;
      if (!c->raw().write(off, &b, 1).ok() || !c->raw().persist(off, 1).ok()) return "cannot damage";
      hit = recs[1].second;
    }
  }
  if (hit.empty()) return "no log with three records";
  if (std::string why = open_refused_and_check_reports(path); !why.empty()) return why;
  Result<SalvageReport> rep = salvage(path, out);
  if (!rep.ok()) return "salvage: " + rep.status().to_string();
  // The damaged record's update is lost: said, not passed over (its key
  // may read an older value from the backend).
  if (rep->problems.size() != 1 || rep->problems[0].find("are lost") == std::string::npos) {
    return "salvage did not name the damaged record";
  }
  auto saved = must(Store::open(out, small()));
  for (int i = 0; i < 220; i++) {
    const std::string k = "k" + std::to_string(i);
    std::string v;
    const Status g = saved->get(k, &v);
    if (k == hit) {
      if (!g.is_not_found()) return "the damaged record's key " + k + " was salvaged";
    } else if (!g.ok() || v != (i < 200 ? "v" + std::to_string(i) : "w")) {
      return "salvage lost " + k;
    }
  }
  return "";
}

TEST(DamagedStoreTest, ADamagedLogRecordBeforeACleanCloseIsReported) {
  pm::test::TempDir dir;
  EXPECT_EQ(damaged_log_record_is_reported(dir.file("s.pm"), dir.file("saved.pm")), "");
}

TEST(DamagedStoreTest, PlantedIgnoredCloseMarkIsCaught) {
  pm::test::TempDir dir;
  g_kv_planted_bugs.ignore_close_marks = true;
  const std::string problem = damaged_log_record_is_reported(dir.file("s.pm"), dir.file("saved.pm"));
  g_kv_planted_bugs.ignore_close_marks = false;
  EXPECT_NE(problem, "");
}

// A real file that says it is pmem, so that a store on it persists each
// record before writing the next (kSync on pmem) wherever the test runs.
class ClaimsPmem final : public pm::Persist {
 public:
  explicit ClaimsPmem(std::unique_ptr<pm::Persist> real) : real_(std::move(real)) {}
  bool is_pmem() const override { return true; }
  const std::byte* view() const override { return real_->view(); }
  uint64_t size() const override { return real_->size(); }
  void write(uint64_t off, const void* src, size_t n) override { real_->write(off, src, n); }
  void flush(uint64_t off, size_t n) override { real_->flush(off, n); }
  Status drain() override { return real_->drain(); }
  Status resize(uint64_t keep, uint64_t n) override { return real_->resize(keep, n); }
  uint64_t free_bytes() const override { return real_->free_bytes(); }
  void set_path(const std::string& path) override { real_->set_path(path); }
  bool same_file(int fd) const override { return real_->same_file(fd); }

 private:
  std::unique_ptr<pm::Persist> real_;
};

// A session of the store at `path` in a child that puts keys [from, to)
// and dies without closing it (no close marks). `in_order`: on "pmem".
void crashed_session(const std::string& path, bool in_order, int from, int to) {
  const int rc = pm::test::exit_code_in_child([&] {
    pm::PersistOpener opener = pm::open_pmem_file;
    if (in_order) {
      opener = [](const std::string& p) -> Result<std::unique_ptr<pm::Persist>> {
        Result<std::unique_ptr<pm::Persist>> real = pm::open_pmem_file(p);
        if (!real.ok()) return real.status();
        return std::unique_ptr<pm::Persist>(new ClaimsPmem(std::move(*real)));
      };
    }
    auto c = pm::open_container(path, container_options(small()), false, opener);
    if (!c.ok()) return 2;
    auto s = open_store_on(c->get(), small());
    if (!s.ok() || (*s)->stats().is_pmem != in_order) return 3;
    for (int i = from; i < to; i++) {
      if (!(*s)->put("k" + std::to_string(i), "v" + std::to_string(i)).ok()) return 4;
    }
    if (!(*s)->sync().ok()) return 5;
    ::_exit(0);  // a crash: nothing closes
  });
  ASSERT_EQ(rc, 0);
}

// Flips a byte of the key of the second of log 0's accepted records, which
// must hold at least `records`; returns that key.
std::string damage_second_record(const std::string& path, size_t records) {
  auto c = pm::test::must(pm::Container::open(path));
  const BackendRoot& r = *c->root<BackendRoot>();
  const Limits lim{r.max_key, r.max_value, r.log_bytes / 4};
  Log log(&c->raw(), 0, 0, r.log_bytes);
  std::vector<std::pair<uint64_t, std::string>> recs;
  accepted_records(r, false, 0, log, lim, [&](const Record& rec, uint64_t pos) {
    recs.push_back({pos, std::string(rec.ops[0].key)});
  });
  EXPECT_GE(recs.size(), records);
  if (recs.size() < 2) return "";
  const uint64_t off = recs[1].first % r.log_bytes + sizeof(RecordHeader) + sizeof(OpHeader);
  char b;
  EXPECT_TRUE(c->raw().read(off, &b, 1).ok());
  b ^= 0x20;
  EXPECT_TRUE(c->raw().write(off, &b, 1).ok() && c->raw().persist(off, 1).ok());
  return recs[1].second;
}

// After a crash, a log ends at its first record that does not read: the
// torn end of what was written, or damage. Two things tell damage even
// without a close mark: a valid record past it written in order (a store
// on pmem persists each record before it writes the next), and an end
// short of where the last session began (its open made the records
// before that durable). Either way the open must refuse rather than
// silently drop the later records (found by a user trial: stale values,
// deleted keys back, `pm check` "consistent").
std::string damage_after_a_crash_is(bool in_order, const std::string& dir) {
  const std::string path = dir + "/s.pm";
  { must(Store::open(path, small())); }  // created, empty, closed
  crashed_session(path, in_order, 0, 10);
  // Off pmem, a second crashed session begins past the first one's records.
  if (!in_order) crashed_session(path, false, 10, 20);
  const std::string hit = damage_second_record(path, in_order ? 3 : 11);
  if (std::string why = open_refused_and_check_reports(path); !why.empty()) return why;
  Result<SalvageReport> rep = salvage(path, dir + "/saved.pm");
  if (!rep.ok()) return "salvage: " + rep.status().to_string();
  auto saved = must(Store::open(dir + "/saved.pm", small()));
  for (int i = 0; i < (in_order ? 10 : 20); i++) {
    const std::string k = "k" + std::to_string(i);
    std::string v;
    const Status g = saved->get(k, &v);
    if (k != hit && (!g.ok() || v != "v" + std::to_string(i))) return "salvage lost " + k;
  }
  return "refused";
}

// Refused as it should be, and opened silently with `bug` planted.
void refused_unless(bool in_order, bool KvPlantedBugs::*bug) {
  {
    pm::test::TempDir dir;
    EXPECT_EQ(damage_after_a_crash_is(in_order, dir.path()), "refused");
  }
  pm::test::TempDir dir;
  g_kv_planted_bugs.*bug = true;
  EXPECT_EQ(damage_after_a_crash_is(in_order, dir.path()), "opened");
  g_kv_planted_bugs = KvPlantedBugs();
}

TEST(DamagedStoreTest, ADamagedRecordBeforeOneWrittenInOrderIsReportedAfterACrash) {
  refused_unless(true, &KvPlantedBugs::ignore_in_order_records);
}

TEST(DamagedStoreTest, ADamagedRecordBeforeTheLastSessionIsReportedAfterACrash) {
  refused_unless(false, &KvPlantedBugs::torn_tail_before_session);
}

// A damaged ordered index: ordered reads fail with kCorruption (gets do
// not use it), pm check names it, salvage (which reads the table) copies
// every key; a damaged index root refuses the open with the way out.
TEST(DamagedStoreTest, ADamagedIndexFailsScansNotGetsAndSalvageCopiesEverything) {
  pm::test::TempDir dir;
  const std::string path = dir.file("s.pm");
  make_store(path);
  for (const bool whole_root : {false, true}) {
    damage(path, "k3", [&](BackendEntry*, BackendRoot* r) {
      auto* idx = reinterpret_cast<IndexRoot*>(r->index);
      auto* node = reinterpret_cast<uint32_t*>(idx->root);
      pm::Container::owner_of(idx)->will_write(whole_root ? static_cast<void*>(idx) : node, 8);
      if (whole_root) {
        idx->magic ^= 1;
      } else {
        node[0] ^= 1;  // the root node's magic
      }
    });
    if (whole_root) {
      Result<std::unique_ptr<Store>> s = Store::open(path, small());
      ASSERT_FALSE(s.ok());
      EXPECT_EQ(s.status().code(), Code::kCorruption);
      EXPECT_NE(s.status().message().find("pm kv salvage"), std::string::npos)
          << s.status().to_string();
    } else {
      Reads r = read_everything(path, "k7");
      EXPECT_TRUE(r.get.ok()) << r.get.to_string();
      EXPECT_TRUE(r.scan.is_corruption()) << r.scan.to_string();
    }
    auto c = pm::test::must(pm::Container::open(path));
    Result<StoreCheck> ck = check_store(c.get());
    ASSERT_TRUE(ck.ok());
    ASSERT_FALSE(ck->problems.empty());
    EXPECT_NE(ck->problems[0].find("index"), std::string::npos) << ck->problems[0];
    c.reset();
    const std::string out = dir.file(whole_root ? "saved2.pm" : "saved1.pm");
    Result<SalvageReport> rep = salvage(path, out);
    ASSERT_TRUE(rep.ok()) << rep.status().to_string();
    EXPECT_EQ(rep->keys, 220u);
    auto s = must(Store::open(out, small()));
    int n = 0;
    ASSERT_TRUE(s->scan("", [&](std::string_view, std::string_view) { return ++n; }).ok());
    EXPECT_EQ(n, 220);
    if (!whole_root) {  // undo the node's damage for the next round
      damage(path, "k3", [&](BackendEntry*, BackendRoot* r) {
        auto* node = reinterpret_cast<uint32_t*>(reinterpret_cast<IndexRoot*>(r->index)->root);
        pm::Container::owner_of(node)->will_write(node, 8);
        node[0] ^= 1;
      });
    }
  }
}

// Stores for index damage: keys of up to 1024 bytes (pm's default), so
// that a damaged key length up to that passes the limit check.
StoreOptions indexed_options() {
  StoreOptions o = small();
  o.max_key_bytes = 1024;
  return o;
}

// Key i of such a store: "key00000" on, then `pad` dots (ascending in i).
std::string key_at(int i, size_t pad = 0) {
  char k[16];
  std::snprintf(k, sizeof k, "key%05d", i);
  return k + std::string(pad, '.');
}

// A store of keys 0 .. keys, put in ascending order (full index leaves)
// and all applied to the backend and its ordered index.
void make_indexed_store(const std::string& path, int keys, size_t pad = 0) {
  auto s = must(Store::open(path, indexed_options()));
  ASSERT_NE(s, nullptr);
  for (int i = 0; i < keys; i++) ASSERT_TRUE(s->put(key_at(i, pad), "v").ok());
  ASSERT_TRUE(s->checkpoint().ok());
}

// The index leaf holding `key` and the key's cell offset in it; nullptr
// when none does. ordered_index.cc's layout: a 32-byte header {magic,
// level, n, heap, dead, reserved: u32; first: u64}, u32 cell offsets, cells
// {[inner: u64 child], u16 length, key}.
char* index_leaf_with(const BackendRoot* r, std::string_view key, uint32_t* cell) {
  const auto* idx = reinterpret_cast<const IndexRoot*>(r->index);
  char* p = reinterpret_cast<char*>(idx->root);
  for (uint32_t level = idx->height - 1;; level--) {
    uint32_t n;
    std::memcpy(&n, p + 8, 4);
    const uint32_t pre = level == 0 ? 0 : 8;
    uint64_t child;  // inner: the last cell's child whose key is <= key, else `first`
    std::memcpy(&child, p + 24, 8);
    for (uint32_t i = 0; i < n; i++) {
      uint32_t off;
      std::memcpy(&off, p + 32 + 4 * i, 4);
      uint16_t len;
      std::memcpy(&len, p + off + pre, 2);
      const std::string_view k(p + off + pre + 2, len);
      if (level == 0 && k == key) {
        *cell = off;
        return p;
      }
      if (level > 0 && k <= key) std::memcpy(&child, p + off, 8);
    }
    if (level == 0) return nullptr;
    p = reinterpret_cast<char*>(child);
  }
}

// A full scan of a store holding keys 0 .. keys: "" when it lists every
// key in order, or fails with kCorruption; else what went wrong.
std::string scan_lists_all_or_fails(Store& s, int keys, size_t pad = 0) {
  int n = 0;
  bool wrong = false;
  const Status st = s.scan("", [&](std::string_view k, std::string_view) {
    wrong |= n >= keys || k != key_at(n, pad);
    n++;
    return !wrong;
  });
  if (!st.ok()) return st.is_corruption() ? "" : "not kCorruption: " + st.to_string();
  if (wrong || n != keys) {
    return "a scan returned OK with " + std::to_string(n) + " of " + std::to_string(keys) +
           " keys" + (wrong ? " (a wrong one among them)" : "");
  }
  return "";
}

// The tester's case: one byte of an index leaf flipped (the low byte of a
// key's length: 8 -> 247) made the key read as itself and the next 239
// bytes of the node, which still sorts between its neighbours; the scan read
// that key from the table, found nothing, and went on: `pm kv ls` listed
// 1999 of 2000 keys and exited 0. The cells' lengths no longer add up to
// the node's: the scan fails, naming the store's file.
TEST(DamagedStoreTest, AFlippedIndexKeyLengthFailsScansInsteadOfLeavingTheKeyOut) {
  pm::test::TempDir dir;
  const std::string path = dir.file("s.pm");
  make_indexed_store(path, 3000);
  std::string key;  // one whose cell lies low enough for 247 bytes of key to stay in its node
  {
    pm::Options o;
    o.tracker = pm::TrackerKind::kHints;
    auto c = pm::test::must(pm::Container::open(path, o));
    ASSERT_TRUE(c != nullptr);
    const BackendRoot* r = c->root<BackendRoot>();
    const uint32_t bytes = reinterpret_cast<const IndexRoot*>(r->index)->node_bytes;
    uint32_t cell = 0;
    char* leaf = nullptr;
    for (int i = 1400; leaf == nullptr && i < 1700; i++) {
      key = key_at(i);
      leaf = index_leaf_with(r, key, &cell);
      ASSERT_NE(leaf, nullptr) << key;
      if (cell + 2 + 0xf7 > bytes) leaf = nullptr;
    }
    ASSERT_NE(leaf, nullptr);
    ASSERT_EQ(leaf[cell], 8);
    c->will_write(leaf + cell, 1);
    leaf[cell] = static_cast<char>(0xf7);
    ASSERT_TRUE(c->commit().ok());
  }
  Reads r = read_everything(path, key);
  EXPECT_TRUE(r.get.ok()) << r.get.to_string();  // gets do not use the index
  ASSERT_TRUE(r.scan.is_corruption()) << r.scan.to_string() << ", " << r.seen.size() << " keys";
  EXPECT_NE(r.scan.message().find(path), std::string::npos) << r.scan.to_string();
  EXPECT_NE(r.scan.message().find("pm kv salvage"), std::string::npos) << r.scan.to_string();
  {  // the iterator too
    auto s = must(Store::open(path, small()));
    ASSERT_NE(s, nullptr);
    auto it = s->iterator();
    int n = 0;
    for (it->seek(""); it->valid(); it->next()) n++;
    EXPECT_TRUE(it->status().is_corruption()) << it->status().to_string() << ", " << n << " keys";
  }
  auto c = pm::test::must(pm::Container::open(path));
  Result<StoreCheck> ck = check_store(c.get());
  ASSERT_TRUE(ck.ok());
  ASSERT_FALSE(ck->problems.empty());
  EXPECT_NE(ck->problems[0].find("index"), std::string::npos) << ck->problems[0];
}

// Any one byte of an index leaf damaged (each in turn, two ways: every bit,
// and the lowest), then of the bytes the root (an inner node) uses, a full
// scan lists every key or fails: never fewer keys, or others, with OK. The
// leaf is in the middle of the tree (keys on both sides) and holds a
// boundary of the scan's batches of 256 keys; keys of 40 bytes keep the
// tree small. The damage goes into the open store's mapping and is undone
// after each scan (the index keeps nothing in DRAM; a reopen per byte would
// take seconds).
TEST(DamagedStoreTest, AnyFlippedByteOfAnIndexLeafFailsScansOrLeavesThemWhole) {
  pm::test::TempDir dir;
  const std::string path = dir.file("s.pm");
  constexpr int kKeys = 300;
  constexpr size_t kPad = 32;
  make_indexed_store(path, kKeys, kPad);
  auto c = pm::test::must(pm::Container::open(path, container_options(indexed_options())));
  ASSERT_TRUE(c != nullptr);
  auto s = must(open_store_on(c.get(), indexed_options()));
  ASSERT_NE(s, nullptr);
  const BackendRoot* r = c->root<BackendRoot>();
  const auto* idx = reinterpret_cast<const IndexRoot*>(r->index);
  ASSERT_EQ(idx->height, 2u);
  uint32_t cell = 0;
  char* leaf = index_leaf_with(r, key_at(256, kPad), &cell);  // a batch boundary inside it
  ASSERT_NE(leaf, nullptr);
  ASSERT_NE(index_leaf_with(r, key_at(0, kPad), &cell), leaf) << "not the first leaf";
  ASSERT_NE(index_leaf_with(r, key_at(kKeys - 1, kPad), &cell), leaf) << "not the last leaf";
  ASSERT_EQ(index_leaf_with(r, key_at(255, kPad), &cell), leaf) << "the boundary not at its start";
  char* root = reinterpret_cast<char*>(idx->root);
  uint32_t root_n, root_heap;
  std::memcpy(&root_n, root + 8, 4);
  std::memcpy(&root_heap, root + 12, 4);
  ASSERT_EQ(scan_lists_all_or_fails(*s, kKeys, kPad), "");
  const uint32_t bytes = idx->node_bytes;
  for (char* node : {leaf, root}) {
    for (const int flip : {0xff, 0x01}) {
      for (uint32_t at = 0; at < bytes; at++) {
        if (node == root && at == 32 + 4 * root_n) at = root_heap;  // the root's free bytes
        c->will_write(node + at, 1);
        node[at] = static_cast<char>(node[at] ^ flip);
        const std::string wrong = scan_lists_all_or_fails(*s, kKeys, kPad);
        node[at] = static_cast<char>(node[at] ^ flip);
        ASSERT_EQ(wrong, "") << "byte " << at << " of the " << (node == leaf ? "leaf" : "root")
                             << " xor " << flip;
      }
    }
  }
  EXPECT_EQ(scan_lists_all_or_fails(*s, kKeys, kPad), "");
  int n = 0;  // undone: every key again
  ASSERT_TRUE(s->scan("", [&](std::string_view, std::string_view) { return ++n; }).ok());
  EXPECT_EQ(n, kKeys);
}

// Issue 17, defect 1: kAsync with bursts longer than a log between syncs
// stopped the store ("raw range outside the raw region").
TEST(RobustnessTest, AsyncBurstsLongerThanALogDoNotStopTheStore) {
  pm::test::TempDir dir;
  StoreOptions o = small(true);
  o.logs = 1;
  o.log_bytes = 1 << 20;
  o.max_value_bytes = 200000;
  o.durability = Durability::kAsync;
  o.async_sync_ms = 1000;  // no background sync during the burst
  auto s = must(Store::open(dir.file("s.pm"), o));
  const std::string big(190000, 'x');
  std::atomic<int> failed{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < 4; t++) {
    ts.emplace_back([&, t] {
      for (int i = 0; i < 60; i++) {
        if (!s->put("t" + std::to_string(t) + "-" + std::to_string(i % 7), big).ok()) failed++;
      }
    });
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(failed.load(), 0);
  EXPECT_TRUE(s->sync().ok());
  EXPECT_TRUE(s->put("after", "the burst").ok());
}

// A stopped store answers updates with kIOError (EIO through the mount),
// not the code of whatever stopped it.
TEST(RobustnessTest, AStoppedStoreReportsIoErrors) {
  StopLatch latch(nullptr, "");
  latch.stop(Status::invalid_argument("raw range outside the raw region"));
  EXPECT_EQ(latch.status().code(), pm::Code::kIOError);
  StopLatch full(nullptr, "");
  full.stop(Status::no_space("disk full"));
  EXPECT_EQ(full.status().code(), pm::Code::kNoSpace);
}

// The store path of a test whose death test re-executes it: the child
// runs the test again up to EXPECT_EXIT, takes the parent's path from the
// environment and makes no directory of its own (it exits without
// removing one).
class ChildSharedPath {
 public:
  ChildSharedPath() {
    const char* inherited = std::getenv(kEnv);
    if (inherited == nullptr) dir_.emplace();
    in_child_ = inherited != nullptr;
    path_ = in_child_ ? inherited : dir_->file("s.pm");
    ::setenv(kEnv, path_.c_str(), 1);
  }
  ~ChildSharedPath() { ::unsetenv(kEnv); }
  bool in_child() const { return in_child_; }
  const std::string& path() const { return path_; }

 private:
  static constexpr const char* kEnv = "PM_TEST_NO_MEMORY_PATH";
  std::optional<pm::test::TempDir> dir_;
  bool in_child_ = false;
  std::string path_;
};

// Values of 200 KiB: each item and copy a mapping of its own (see below).
StoreOptions large_value_options() {
  StoreOptions o = small();
  o.max_value_bytes = 256 << 10;
  o.log_bytes = 4 << 20;
  return o;
}

// The pages this process maps (its address space).
long mapped_pages() {
  long pages = 0;
  if (FILE* f = std::fopen("/proc/self/statm", "r")) {
    if (std::fscanf(f, "%ld", &pages) != 1) pages = 0;
    std::fclose(f);
  }
  return pages;
}

// Out of DRAM for a new item: the update fails with kNoSpace having
// changed nothing (it is not logged: after a reopen the old value stands),
// and the store goes on once memory is back. In a child started afresh
// (a death test of the threadsafe style execs the binary again, so that no
// earlier test's freed memory can serve the item), whose address space is
// capped just above what it maps.
void put_without_memory(const std::string& path, const StoreOptions& o, const std::string& big) {
  ::mallopt(M_MMAP_THRESHOLD, 64 << 10);  // the item: a mapping of its own
  auto s = Store::open(path, o);
  if (!s.ok() || !(*s)->put("k", "small").ok()) ::_exit(2);
  rlimit was{};
  ::getrlimit(RLIMIT_AS, &was);
  const long pages = mapped_pages();
  if (pages == 0) ::_exit(3);
  rlimit cap = was;
  cap.rlim_cur = static_cast<rlim_t>(pages) * 4096 + (64 << 10);
  if (::setrlimit(RLIMIT_AS, &cap) != 0) ::_exit(4);
  Status st = (*s)->put("k", big);  // its item: a mapping the cap refuses
  if (st.code() != pm::Code::kNoSpace) ::_exit(5);
  std::string v;
  if (!(*s)->get("k", &v).ok() || v != "small") ::_exit(6);
  if (::setrlimit(RLIMIT_AS, &was) != 0) ::_exit(7);
  if (!(*s)->put("other", big).ok()) ::_exit(8);
  ::_exit(0);
}

TEST(RobustnessTest, AnUpdateWithNoMemoryForItsItemFailsAndChangesNothing) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "the sanitizers reserve address space of their own";
#endif
  ChildSharedPath shared;
  const std::string& path = shared.path();
  const StoreOptions o = large_value_options();
  const std::string big(200 << 10, 'b');
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(put_without_memory(path, o, big), ::testing::ExitedWithCode(0), "");
  auto s = must(Store::open(path, o));
  std::string v;
  ASSERT_TRUE(s->get("k", &v).ok());
  EXPECT_EQ(v, "small");
  ASSERT_TRUE(s->get("other", &v).ok());
  EXPECT_EQ(v, big);
}

// Out of DRAM for a copy the caller asked for (a get's value, a scan's or
// an iterator's batch, a transaction's buffered put): a status, not an
// exception out of the API; with memory back, all of them work.
void read_without_memory(const std::string& path, const StoreOptions& o, const std::string& big) {
  ::mallopt(M_MMAP_THRESHOLD, 64 << 10);  // each large copy: a mapping of its own
  auto s = Store::open(path, o);
  if (!s.ok() || !(*s)->put("k", big).ok()) ::_exit(2);
  Store& st = **s;
  auto it = st.iterator();
  rlimit was{};
  ::getrlimit(RLIMIT_AS, &was);
  const long pages = mapped_pages();
  if (pages == 0) ::_exit(3);
  rlimit cap = was;
  cap.rlim_cur = static_cast<rlim_t>(pages) * 4096 + (64 << 10);
  auto attempts = [&](int first_code) {
    std::string v;
    if (st.get("k", &v).code() != pm::Code::kNoSpace) ::_exit(first_code);
    Status sc = st.scan("", "", 0, [](std::string_view, std::string_view) { return true; });
    if (sc.code() != pm::Code::kNoSpace) ::_exit(first_code + 1);
    it->seek("");
    if (it->valid() || it->status().code() != pm::Code::kNoSpace) ::_exit(first_code + 2);
    auto txn = st.begin();
    if (txn->put("t", big).code() != pm::Code::kNoSpace) ::_exit(first_code + 3);
  };
  if (::setrlimit(RLIMIT_AS, &cap) != 0) ::_exit(4);
  attempts(10);
  if (::setrlimit(RLIMIT_AS, &was) != 0) ::_exit(5);
  std::string v;
  if (!st.get("k", &v).ok() || v != big) ::_exit(20);
  it->seek("");
  if (!it->valid() || it->value() != big) ::_exit(21);
  ::_exit(0);
}

TEST(RobustnessTest, ReadsAndTransactionsWithNoMemoryForTheirCopiesReturnAStatus) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "the sanitizers reserve address space of their own";
#endif
  ChildSharedPath shared;
  const std::string& path = shared.path();
  const StoreOptions o = large_value_options();
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(read_without_memory(path, o, std::string(200 << 10, 'b')),
              ::testing::ExitedWithCode(0), "");
}

// Out of DRAM at open: the updates the logs hold that no epoch applied are
// rebuilt in DRAM (an item each). In a re-executed child (as above), opens
// under address-space caps that grow from too small to enough: each fails
// with a status or succeeds (an exception would end the child), and some
// fail while rebuilding; the store, opened with memory, holds every update.
void open_without_memory(const std::string& path, const StoreOptions& o) {
  ::mallopt(M_MMAP_THRESHOLD, 64 << 10);  // each large item: a mapping of its own
  rlimit was{};
  ::getrlimit(RLIMIT_AS, &was);
  const long pages = mapped_pages();
  if (pages == 0) ::_exit(3);
  // The container reserves its largest size of address space at open.
  const uint64_t base = static_cast<uint64_t>(pages) * 4096 + container_options(o).max_size;
  bool refused_rebuilding = false;
  for (uint64_t extra = 0;; extra += 256 << 10) {
    if (extra > (256ull << 20)) ::_exit(4);  // never opened
    rlimit cap = was;
    cap.rlim_cur = static_cast<rlim_t>(base + extra);
    if (::setrlimit(RLIMIT_AS, &cap) != 0) ::_exit(5);
    Result<std::unique_ptr<Store>> s = Store::open(path, o);
    if (::setrlimit(RLIMIT_AS, &was) != 0) ::_exit(6);
    if (s.ok()) break;
    if (s.status().code() == pm::Code::kNoSpace &&
        s.status().message().find("rebuilding") != std::string::npos) {
      refused_rebuilding = true;
    }
  }
  ::_exit(refused_rebuilding ? 0 : 7);
}

TEST(RobustnessTest, AnOpenWithNoMemoryToRebuildItsLogsFailsAndLosesNothing) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "the sanitizers reserve address space of their own";
#endif
  ChildSharedPath shared;
  const std::string& path = shared.path();
  const StoreOptions o = large_value_options();
  auto value = [](int i) { return std::string(200 << 10, static_cast<char>('a' + i)); };
  if (!shared.in_child()) {
    auto s = must(Store::open(path, o));
    for (int i = 0; i < 12; i++) ASSERT_TRUE(s->put("k" + std::to_string(i), value(i)).ok());
  }  // closed with every update in the logs only
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(open_without_memory(path, o), ::testing::ExitedWithCode(0), "");
  auto s = must(Store::open(path, o));
  for (int i = 0; i < 12; i++) {
    std::string v;
    ASSERT_TRUE(s->get("k" + std::to_string(i), &v).ok()) << i;
    EXPECT_EQ(v, value(i)) << i;
  }
}

// Issue 17, defect 5: a create killed half way poisoned the path.
TEST(RobustnessTest, ACreateKilledHalfWayLeavesNothingAtThePath) {
  pm::test::TempDir dir;
  const std::string path = dir.file("s.pm");
  for (int round = 0; round < 2; round++) {
    pid_t pid = ::fork();
    if (pid == 0) {
      // Killed while formatting the new store (before it is published).
      pm::Options co = container_options(small());
      co.initialize = [](pm::Container&) -> Status {
        ::raise(SIGKILL);
        return Status();
      };
      (void)pm::Container::create(path, co);
      ::_exit(0);
    }
    int status = 0;
    ::waitpid(pid, &status, 0);
    ASSERT_TRUE(WIFSIGNALED(status));
    EXPECT_NE(::access(path.c_str(), F_OK), 0) << "a half-made file at the path";
  }
  // The next create takes over what the killed ones left.
  auto s = must(Store::open(path, small()));
  ASSERT_TRUE(s != nullptr);
  EXPECT_TRUE(s->put("k", "v").ok());
  EXPECT_NE(::access(dir.file(".s.pm.creating").c_str(), F_OK), 0);
}

TEST(RobustnessTest, KillsAtRandomMomentsOfACreateNeverPoisonThePath) {
  pm::test::TempDir dir;
  const std::string path = dir.file("s.pm");
  for (int round = 0; round < 20; round++) {
    ::unlink(path.c_str());
    pid_t pid = ::fork();
    if (pid == 0) {
      auto s = Store::open(path, small());
      if (s.ok()) (void)(*s)->put("k", "v");
      ::_exit(0);
    }
    ::usleep(static_cast<useconds_t>(round * 1500));
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    auto s = Store::open(path, small());
    ASSERT_TRUE(s.ok()) << "round " << round << ": " << s.status().to_string();
  }
}

}  // namespace
}  // namespace kv
