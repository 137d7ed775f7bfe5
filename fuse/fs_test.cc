// pmfs::Fs without a kernel: hard links across a remount, what the mount's
// index does with names and inode keys left behind, the link limit, and
// what a full disk tells each descriptor.
#include "fuse/fs.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <string>

#include "fuse/file_content.h"
#include "fuse/key_names.h"
#include "kv/store.h"
#include "testutil/small_fs.h"
#include "testutil/store_options.h"
#include "testutil/temp_dir.h"

namespace pmfs {
namespace {

const Caller kRoot{0, 0};

class FsTest : public ::testing::Test {
 protected:
  FsTest() : path_(dir_.file("s.kv")) {
    options_ = pm::test::small_store_options();
    options_.background = true;  // thousands of transactions: gleaned as they come
    options_.log_bytes = 1 << 20;
    options_.max_key_bytes = 256;
  }

  // A fresh mount of the store: opened and indexed.
  std::unique_ptr<Fs> mount() {
    fs_.reset();
    auto s = kv::Store::open(path_, options_);
    EXPECT_TRUE(s.ok()) << s.status().to_string();
    if (!s.ok()) return nullptr;
    store_ = s->get();
    MountOptions m;
    m.store_path = path_;
    m.max_key_bytes = options_.max_key_bytes;
    m.rename_step_bytes = rename_step_;
    m.index_at_mount = index_at_mount_;
    auto fs = std::make_unique<Fs>(std::move(*s), m);
    EXPECT_TRUE(fs->build_index().ok());
    return fs;
  }

  Ino lookup(Ino parent, const char* name, struct stat* st = nullptr) {
    fuse_entry_param e;
    if (fs_->do_lookup(parent, name, &e) != 0) return 0;
    if (st != nullptr) *st = e.attr;
    return e.ino;
  }

  // A new file `name` in parent holding content, written through a handle
  // (a large one goes to chunks). 0 or the first errno.
  int write_new(Ino parent, const char* name, const std::string& content) {
    fuse_entry_param e;
    if (int err = fs_->do_make(parent, name, S_IFREG | 0644, 0, "", kRoot, &e)) return err;
    Handle* h = nullptr;
    bool changed = false;
    if (int err = fs_->do_open(e.ino, O_WRONLY, kRoot, &h, &changed)) return err;
    int err = fs_->do_write(h, content.data(), content.size(), 0, kRoot, &changed);
    if (err == 0) err = fs_->do_flush(h);
    fs_->do_release(h);
    return err;
  }

  // A handle on ino opened with flags; nullptr (and a failure) if refused.
  Handle* open(Ino ino, int flags) {
    Handle* h = nullptr;
    bool changed = false;
    const int err = fs_->do_open(ino, flags, kRoot, &h, &changed);
    EXPECT_EQ(err, 0) << "open of inode " << ino;
    return err == 0 ? h : nullptr;
  }

  int write(Handle* h, std::string_view data, off_t off, bool page_cache = false) {
    bool changed = false;
    return fs_->do_write(h, data.data(), data.size(), off, kRoot, &changed, page_cache);
  }

  std::string read(Ino ino) {
    Handle* h = nullptr;
    bool changed = false;
    if (fs_->do_open(ino, O_RDONLY, kRoot, &h, &changed) != 0) return "<open failed>";
    std::string out;
    const int err = fs_->do_read(h, 1 << 16, 0, &out);
    fs_->do_release(h);
    return err == 0 ? out : "<read failed>";
  }

  pm::test::TempDir dir_;
  std::string path_;
  kv::StoreOptions options_;
  kv::Store* store_ = nullptr;  // owned by fs_
  std::unique_ptr<Fs> fs_;
  uint64_t rename_step_ = 0;  // MountOptions::rename_step_bytes
  bool index_at_mount_ = false;
};

TEST_F(FsTest, LinkedNamesAreOneInodeAcrossARemount) {
  fs_ = mount();
  fuse_entry_param e, d, l;
  ASSERT_EQ(fs_->do_make(kRootIno, "a", S_IFREG | 0640, 0, "content", kRoot, &e), 0);
  ASSERT_EQ(fs_->do_make(kRootIno, "d", S_IFDIR | 0755, 0, "", kRoot, &d), 0);
  ASSERT_EQ(fs_->do_link(e.ino, d.ino, "b", &l), 0);
  EXPECT_EQ(l.ino, e.ino);
  EXPECT_EQ(l.attr.st_nlink, 2u);
  EXPECT_EQ(fs_->do_link(d.ino, kRootIno, "dir", &l), EPERM);
  EXPECT_EQ(fs_->do_link(e.ino, d.ino, "b", &l), EEXIST);

  fs_ = mount();
  struct stat a {}, b {};
  const Ino ia = lookup(kRootIno, "a", &a), id = lookup(kRootIno, "d");
  const Ino ib = lookup(id, "b", &b);
  ASSERT_NE(ia, 0u);
  EXPECT_EQ(ia, ib);
  EXPECT_EQ(a.st_nlink, 2u);
  EXPECT_EQ(a.st_mode, S_IFREG | 0640u);
  EXPECT_EQ(read(ib), "content");
  // Back to one name, and none: the inode key goes with the last.
  ASSERT_EQ(fs_->do_remove(kRootIno, "a", false), 0);
  struct stat left {};
  lookup(id, "b", &left);
  EXPECT_EQ(left.st_nlink, 1u);
  std::string holder;
  ASSERT_TRUE(store_->get("d/b", &holder).ok());
  ASSERT_EQ(fs_->do_remove(id, "b", false), 0);
  EXPECT_TRUE(store_->get(id_key(kInodePrefix, *key_id("", holder)), &holder).is_not_found());
}

// What a mount made keeps its inode number across remounts (a directory
// read at first use or the whole index at mount), renames and hard links.
// A key put outside the mount has a number of each mount's own, from a
// range of its own; a record copied under another name gives its number
// to one of the two only.
TEST_F(FsTest, InodeNumbersStayAcrossRemounts) {
  fs_ = mount();
  fuse_entry_param f, d, g, l;
  ASSERT_EQ(fs_->do_make(kRootIno, "f", S_IFREG | 0644, 0, "x", kRoot, &f), 0);
  ASSERT_EQ(fs_->do_make(kRootIno, "d", S_IFDIR | 0755, 0, "", kRoot, &d), 0);
  ASSERT_EQ(fs_->do_make(d.ino, "g", S_IFREG | 0644, 0, "y", kRoot, &g), 0);
  EXPECT_LT(f.ino, kStableInoEnd);
  EXPECT_EQ(f.attr.st_ino, f.ino);
  ASSERT_TRUE(store_->put("kv/key", "z").ok());
  // The next number is reserved ahead, durably, for a block of them.
  std::string next;
  ASSERT_TRUE(store_->get(kInoKey, &next).ok());
  ASSERT_EQ(next.size(), 8u);
  EXPECT_GT(get_le<uint64_t>(next, 0), g.ino);

  fs_ = mount();  // directories read at first use
  EXPECT_EQ(lookup(kRootIno, "f"), f.ino);
  EXPECT_EQ(lookup(kRootIno, "d"), d.ino);
  EXPECT_EQ(lookup(d.ino, "g"), g.ino);
  const Ino kv = lookup(kRootIno, "kv");
  EXPECT_GE(kv, kStableInoEnd);
  EXPECT_GE(lookup(kv, "key"), kStableInoEnd);
  ASSERT_EQ(fs_->do_rename(kRootIno, "d", kv, "e", 0), 0);  // its keys move
  ASSERT_EQ(fs_->do_rename(d.ino, "g", kRootIno, "h", 0), 0);
  ASSERT_EQ(fs_->do_link(f.ino, kRootIno, "f2", &l), 0);
  // A copy of h's record under another key.
  const std::string meta(kMetaPrefix);
  std::string record;
  ASSERT_TRUE(store_->put("copy", "c").ok());
  ASSERT_TRUE(store_->get(meta + "h", &record).ok());
  ASSERT_TRUE(store_->put(meta + "copy", record).ok());

  for (bool whole : {false, true}) {
    SCOPED_TRACE(whole ? "index at mount" : "read at first use");
    index_at_mount_ = whole;
    fs_ = mount();
    EXPECT_EQ(lookup(kRootIno, "f"), f.ino);
    EXPECT_EQ(lookup(kRootIno, "f2"), f.ino);
    EXPECT_EQ(lookup(lookup(kRootIno, "kv"), "e"), d.ino);
    const Ino h = lookup(kRootIno, "h"), copy = lookup(kRootIno, "copy");
    EXPECT_NE(h, copy);
    EXPECT_TRUE(h == g.ino || copy == g.ino);
  }
  // With kInoKey gone, numbering starts over; a new file skips the
  // numbers this mount's nodes have.
  ASSERT_TRUE(store_->remove(kInoKey).ok());
  fs_ = mount();
  ASSERT_EQ(lookup(kRootIno, "f"), f.ino);
  fuse_entry_param n;
  ASSERT_EQ(fs_->do_make(kRootIno, "n", S_IFREG | 0644, 0, "", kRoot, &n), 0);
  EXPECT_LT(n.ino, kStableInoEnd);
  EXPECT_NE(n.ino, f.ino);
}

// A damaged kInoKey: new files are numbered by the mount, as keys put
// outside it are, and the key is left as it is.
TEST_F(FsTest, ADamagedInodeCounterLeavesNewFilesNumberedPerMount) {
  fs_ = mount();
  ASSERT_TRUE(store_->put(kInoKey, "bad").ok());
  fs_ = mount();
  fuse_entry_param f;
  ASSERT_EQ(fs_->do_make(kRootIno, "f", S_IFREG | 0644, 0, "x", kRoot, &f), 0);
  EXPECT_GE(f.ino, kStableInoEnd);
  std::string v;
  ASSERT_TRUE(store_->get(std::string(kMetaPrefix) + "f", &v).ok());
  EXPECT_EQ(decode_meta(v)->ino, 0u);
  ASSERT_TRUE(store_->get(kInoKey, &v).ok());
  EXPECT_EQ(v, "bad");
}

// `pm kv del` of every name leaves an inode key: the next mount removes it
// (with its record). A name whose inode key is gone shows what it holds.
TEST_F(FsTest, InodeKeysNoNameHoldsAreRemovedAtMount) {
  fs_ = mount();
  fuse_entry_param e, l;
  ASSERT_EQ(fs_->do_make(kRootIno, "a", S_IFREG | 0644, 0, "x", kRoot, &e), 0);
  ASSERT_EQ(fs_->do_link(e.ino, kRootIno, "b", &l), 0);
  ASSERT_EQ(fs_->do_make(kRootIno, "c", S_IFREG | 0644, 0, "y", kRoot, &e), 0);
  ASSERT_EQ(fs_->do_link(e.ino, kRootIno, "d", &l), 0);
  std::string ab, cd;
  ASSERT_TRUE(store_->get("a", &ab).ok());
  ASSERT_TRUE(store_->get("c", &cd).ok());
  ASSERT_TRUE(store_->remove("a").ok());
  ASSERT_TRUE(store_->remove("b").ok());
  ASSERT_TRUE(store_->remove(inode_key(*key_id("", cd))).ok());

  fs_ = mount();
  std::string v;
  EXPECT_TRUE(store_->get(inode_key(*key_id("", ab)), &v).is_not_found());
  EXPECT_TRUE(store_->get(std::string(kMetaPrefix) + inode_key(*key_id("", ab)), &v).is_not_found());
  struct stat st {};
  const Ino ic = lookup(kRootIno, "c", &st);
  EXPECT_EQ(st.st_nlink, 1u);
  EXPECT_EQ(read(ic), cd);  // the raw id, as `pm kv get` shows it
  // A new link does not take an id a name still holds.
  ASSERT_EQ(fs_->do_make(kRootIno, "e", S_IFREG | 0644, 0, "z", kRoot, &e), 0);
  ASSERT_EQ(fs_->do_link(e.ino, kRootIno, "f", &l), 0);
  ASSERT_TRUE(store_->get("e", &v).ok());
  EXPECT_NE(v, cd);
  EXPECT_NE(v, ab);
}

// A mount reads the root's record and nothing else; each directory is read
// at its first use, without the keys of its subdirectories. The same store
// with a hard link (whose sweep needs every key) is read whole at mount.
TEST_F(FsTest, DirectoriesAreReadAtTheirFirstUse) {
  {
    auto s = kv::Store::open(path_, options_);
    ASSERT_TRUE(s.ok()) << s.status().to_string();
    for (int d = 0; d < 10; d++) {
      for (int f = 0; f < 100; f++) {
        const std::string k = "d" + std::to_string(d) + "/sub/f" + std::to_string(f);
        ASSERT_TRUE((*s)->put(k, "v").ok());
        ASSERT_TRUE((*s)->put("d" + std::to_string(d) + "/f" + std::to_string(f), "vv").ok());
      }
    }
  }
  fs_ = mount();
  EXPECT_EQ(fs_->indexed_inodes(), 1u);
  struct stat st {};
  const Ino d3 = lookup(kRootIno, "d3", &st);  // the root, then d3 (its attributes)
  ASSERT_NE(d3, 0u);
  EXPECT_EQ(st.st_nlink, 3u);      // d3/sub
  EXPECT_EQ(st.st_size, 101);      // its entries
  EXPECT_EQ(fs_->indexed_inodes(), 1u + 10 + 101);
  const Ino f7 = lookup(d3, "f7", &st);
  EXPECT_EQ(st.st_size, 2);
  EXPECT_EQ(read(f7), "vv");
  // Changes in directories never used: each is read first.
  const Ino d4 = lookup(kRootIno, "d4");
  fuse_entry_param e;
  EXPECT_EQ(fs_->do_make(d4, "f1", S_IFREG | 0644, 0, "", kRoot, &e), EEXIST);
  EXPECT_EQ(fs_->do_remove(kRootIno, "d5", true), ENOTEMPTY);
  ASSERT_EQ(fs_->do_rename(kRootIno, "d6", d4, "moved", 0), 0);
  std::string v;
  EXPECT_TRUE(store_->get("d4/moved/sub/f99", &v).ok());
  EXPECT_EQ(v, "v");
  EXPECT_TRUE(store_->get("d6/sub/f99", &v).is_not_found());

  fuse_entry_param l;
  ASSERT_EQ(fs_->do_link(f7, kRootIno, "hard", &l), 0);
  fs_ = mount();
  EXPECT_GT(fs_->indexed_inodes(), 2000u);
}

// A damaged store read one directory at a time: a name still holding a
// gone inode's id (`pm kv del` of the inode key) and a manifest naming a
// chunk that is gone, in a directory never read. The ids the mount hands out
// must not be theirs: the next mount reads every key, and would take the
// name for a name of the new file, or the manifest for an owner of the new
// chunk (whose removal would then discard it).
TEST_F(FsTest, IdsADamagedStoreHoldsAreNotHandedOutAgain) {
  fs_ = mount();
  fuse_entry_param e, d, l;
  ASSERT_EQ(fs_->do_make(kRootIno, "sub", S_IFDIR | 0755, 0, "", kRoot, &d), 0);
  ASSERT_EQ(fs_->do_make(d.ino, "a", S_IFREG | 0644, 0, "old", kRoot, &e), 0);
  ASSERT_EQ(fs_->do_link(e.ino, d.ino, "b", &l), 0);
  std::string held;
  ASSERT_TRUE(store_->get("sub/a", &held).ok());
  ASSERT_TRUE(store_->remove("sub/b").ok());
  ASSERT_TRUE(store_->remove(inode_key(*key_id("", held))).ok());
  Meta chunked;
  chunked.mode = S_IFREG | 0644;
  chunked.chunked = true;
  ASSERT_TRUE(store_->put("sub/big", encode_manifest(Manifest{4096, 8192, {1, 2}})).ok());
  ASSERT_TRUE(store_->put(std::string(kMetaPrefix) + "sub/big", encode_meta(chunked)).ok());

  fs_ = mount();  // no inode or chunk key: directories are read at first use
  ASSERT_EQ(fs_->indexed_inodes(), 1u);
  ASSERT_EQ(fs_->do_make(kRootIno, "f", S_IFREG | 0644, 0, "new", kRoot, &e), 0);
  ASSERT_EQ(fs_->do_link(e.ino, kRootIno, "g", &l), 0);
  std::string v;
  ASSERT_TRUE(store_->get("g", &v).ok());
  EXPECT_NE(v, held);
  const std::string content(10000, 'c');
  ASSERT_EQ(write_new(kRootIno, "c", content), 0);
  ASSERT_TRUE(store_->get("c", &v).ok());
  std::optional<Manifest> m = decode_manifest(v);
  ASSERT_TRUE(m.has_value());
  for (uint64_t id : m->ids) EXPECT_GT(id, 2u);
  EXPECT_EQ(fs_->indexed_inodes(), 4u);  // still the root and its entries: sub never read

  fs_ = mount();  // inode and chunk keys: every key is read at mount
  struct stat st {};
  const Ino sub = lookup(kRootIno, "sub");
  EXPECT_EQ(read(lookup(sub, "a", &st)), held);
  EXPECT_EQ(st.st_nlink, 1u);
  lookup(kRootIno, "f", &st);
  EXPECT_EQ(st.st_nlink, 2u);
  ASSERT_EQ(fs_->do_remove(sub, "big", false), 0);
  EXPECT_EQ(read(lookup(kRootIno, "c")), content);
}

// Chunks do not stop a mount from reading directories at first use while
// the clean-end mark (\0u, the sequence number its put took) holds: no
// update since the last mount ended cleanly. After any update, a mount
// reads every key and sweeps the chunks no manifest names: what a crash
// leaves, and what a large file's key removed outside a mount leaves.
TEST_F(FsTest, OnlyAStoreWithChunksChangedSinceACleanEndIsReadWhole) {
  fs_ = mount();
  std::string v;
  EXPECT_TRUE(store_->get(kCleanKey, &v).is_not_found());
  const std::string content(20000, 'b');
  ASSERT_EQ(write_new(kRootIno, "big", content), 0);
  ASSERT_EQ(write_new(kRootIno, "gone", content), 0);

  fs_ = mount();
  EXPECT_EQ(fs_->indexed_inodes(), 1u);
  EXPECT_EQ(read(lookup(kRootIno, "big")), content);
  const uint64_t seq = store_->next_seq();
  fs_ = mount();  // one that changed nothing leaves the mark alone
  EXPECT_EQ(fs_->indexed_inodes(), 1u);
  EXPECT_EQ(store_->next_seq(), seq);
  fs_.reset();
  {  // what a crash leaves: a chunk no manifest names, put after the mark
    auto s = kv::Store::open(path_, options_);
    ASSERT_TRUE(s.ok()) << s.status().to_string();
    ASSERT_TRUE((*s)->put(chunk_key(1000), "orphan").ok());
  }
  fs_ = mount();
  EXPECT_GT(fs_->indexed_inodes(), 1u);
  EXPECT_TRUE(store_->get(chunk_key(1000), &v).is_not_found());
  EXPECT_EQ(read(lookup(kRootIno, "big")), content);

  fs_.reset();
  std::string manifest;
  {  // `pm kv del gone`: its chunks stay behind
    auto s = kv::Store::open(path_, options_);
    ASSERT_TRUE(s.ok()) << s.status().to_string();
    ASSERT_TRUE((*s)->get("gone", &manifest).ok());
    ASSERT_TRUE((*s)->remove("gone").ok());
  }
  const std::optional<Manifest> m = decode_manifest(manifest);
  ASSERT_TRUE(m.has_value());
  ASSERT_FALSE(m->ids.empty());
  fs_ = mount();
  EXPECT_GT(fs_->indexed_inodes(), 1u);
  for (uint64_t id : m->ids) EXPECT_TRUE(store_->get(chunk_key(id), &v).is_not_found()) << id;
  EXPECT_EQ(lookup(kRootIno, "gone"), 0u);
  fs_ = mount();
  EXPECT_EQ(fs_->indexed_inodes(), 1u);
}

TEST_F(FsTest, LinksStopAtTheLimit) {
  fs_ = mount();
  fuse_entry_param e, l;
  ASSERT_EQ(fs_->do_make(kRootIno, "f", S_IFREG | 0644, 0, "", kRoot, &e), 0);
  for (uint32_t i = 1; i < kLinkMax; i++) {
    ASSERT_EQ(fs_->do_link(e.ino, kRootIno, std::to_string(i).c_str(), &l), 0) << i;
  }
  EXPECT_EQ(l.attr.st_nlink, kLinkMax);
  EXPECT_EQ(fs_->do_link(e.ino, kRootIno, "one more", &l), EMLINK);
}

// Two descriptors share a file's staged content. When one's flush cannot
// put it (a full disk), what the other wrote is dropped with it: the other
// must be told at its own flush, not get 0 and lose its write silently.
TEST_F(FsTest, AFailedPutOfSharedContentIsReportedToEveryWriter) {
  const std::string small = dir_.file("small");
  pm::test::SmallFs fs(small);
  if (!fs.ok()) GTEST_SKIP() << "mount(2) of a tmpfs is not allowed here";
  path_ = small + "/s.kv";
  options_.initial_heap_bytes = 2 << 20;
  options_.max_value_bytes = 64 << 10;
  fs_ = mount();
  ASSERT_NE(fs_, nullptr);
  ASSERT_EQ(write_new(kRootIno, "shared", "original\n"), 0);
  const Ino ino = lookup(kRootIno, "shared");
  ASSERT_NE(ino, 0u);
  {  // the rest of the disk
    const int fd = ::open((small + "/ballast").c_str(), O_WRONLY | O_CREAT, 0600);
    ASSERT_GE(fd, 0);
    const std::string mib(1 << 20, 'b');
    while (::write(fd, mib.data(), mib.size()) > 0) {
    }
    ::close(fd);
  }
  bool changed = false;
  Handle *a = nullptr, *b = nullptr;
  ASSERT_EQ(fs_->do_open(ino, O_WRONLY, kRoot, &b, &changed), 0);
  ASSERT_EQ(fs_->do_write(b, "B", 1, 9, kRoot, &changed), 0);
  ASSERT_EQ(fs_->do_open(ino, O_WRONLY, kRoot, &a, &changed), 0);
  const std::string big(6 << 20, 'a');
  int err = fs_->do_write(a, big.data(), big.size(), 100, kRoot, &changed);
  if (err == 0) err = fs_->do_flush(a);
  ASSERT_NE(err, 0) << "6 MiB fit on the full disk";
  EXPECT_NE(fs_->do_flush(b), 0) << "B's write was dropped with A's";
  EXPECT_EQ(fs_->do_flush(b), 0) << "told once";
  fs_->do_release(a);
  fs_->do_release(b);
  EXPECT_EQ(read(ino), "original\n");
  fs_.reset();
}

// A user trial on a full 200 MiB tmpfs: after 30 of 38 files of 5 MB were
// removed, no write went in, not for minutes, until an fsync. A removed
// file's chunks wait for a sync of the store before they are removed (its
// manifest's removal must be durable first), and 256 of them could wait:
// the room stayed taken. A put the store has no room for now syncs and
// removes them, has the store apply that, and is tried again: the first
// write after the rm goes in (a later trial: it failed 9 times of 9, and
// only the second write went in).
TEST_F(FsTest, RemovingFilesOnAFullDiskMakesRoomWithoutAnFsync) {
  const std::string small = dir_.file("small");
  pm::test::SmallFs fs(small, "size=24m");
  if (!fs.ok()) GTEST_SKIP() << "mount(2) of a tmpfs is not allowed here";
  path_ = small + "/s.kv";
  options_.durability = kv::Durability::kAsync;  // chunks wait for a sync
  options_.initial_heap_bytes = 2 << 20;
  options_.max_value_bytes = 64 << 10;
  fs_ = mount();
  ASSERT_NE(fs_, nullptr);
  const std::string mib(1 << 20, 'f');
  int n = 0, err = 0;
  for (; n < 100 && err == 0; n++) err = write_new(kRootIno, ("f" + std::to_string(n)).c_str(), mib);
  ASSERT_EQ(err, ENOSPC) << n << " files";
  ASSERT_GT(n, 8);
  for (int i = 0; i < 4; i++) {  // 64 chunks of 64 KiB: not enough to sync at once
    ASSERT_EQ(fs_->do_remove(kRootIno, ("f" + std::to_string(i)).c_str(), false), 0) << i;
  }
  EXPECT_EQ(write_new(kRootIno, "new", mib), 0) << "no room after removing 4 files of 1 MiB";
  struct stat st;
  ASSERT_NE(lookup(kRootIno, "new", &st), 0u);
  EXPECT_EQ(st.st_size, 1 << 20);
  EXPECT_TRUE(read(lookup(kRootIno, "new")) == mib.substr(0, 1 << 16));  // the first 64 KiB
  fs_.reset();
}

// statfs on a full disk: a user trial filled a 200 MiB tmpfs until no write
// went in, and df showed 70 MB (35%) free: the store file's logs, journal
// room and metadata counted as free. Free is now what values may take.
TEST_F(FsTest, AFullDiskShowsLittleFreeSpace) {
  const std::string small = dir_.file("small");
  pm::test::SmallFs fs(small, "size=40m");
  if (!fs.ok()) GTEST_SKIP() << "mount(2) of a tmpfs is not allowed here";
  path_ = small + "/s.kv";
  options_.log_bytes = 4 << 20;  // 8 MiB of logs: never room for a file
  options_.initial_heap_bytes = 2 << 20;
  options_.max_value_bytes = 64 << 10;
  fs_ = mount();
  ASSERT_NE(fs_, nullptr);
  struct statvfs before;
  ASSERT_EQ(fs_->do_statfs(&before), 0);
  const std::string mib(1 << 20, 'f');
  int n = 0, err = 0;
  for (; n < 100 && err == 0; n++) err = write_new(kRootIno, ("f" + std::to_string(n)).c_str(), mib);
  ASSERT_EQ(err, ENOSPC) << n << " files";
  const uint64_t stored = static_cast<uint64_t>(n - 1) << 20;
  fs_ = mount();  // statfs caches the store's figures for 5 s
  ASSERT_NE(fs_, nullptr);
  struct statvfs full;
  ASSERT_EQ(fs_->do_statfs(&full), 0);
  const uint64_t free = uint64_t{full.f_bavail} * full.f_frsize;
  EXPECT_LT(free, uint64_t{2} << 20) << "free on a full disk, after " << n - 1 << " files of 1 MiB";
  EXPECT_GT(uint64_t{before.f_bavail} * before.f_frsize, stored / 4 * 3)
      << "an empty store's free space is about what went in";
  EXPECT_GE(uint64_t{full.f_blocks} * full.f_frsize - free, stored) << "used";
  fs_.reset();
}

// A directory rename larger than one transaction takes several, atomic all
// the same (docs/fuse.md): every key below moves (names, records, markers,
// attributes, a hard link's name), none is left under the old name, and a
// rename that a crash stopped after its first transaction is finished by
// the next mount.
TEST_F(FsTest, ADirectoryRenameLargerThanATransactionMovesWhole) {
  rename_step_ = 4096;
  fs_ = mount();
  ASSERT_NE(fs_, nullptr);
  fuse_entry_param d, sub, e;
  ASSERT_EQ(fs_->do_make(kRootIno, "d", S_IFDIR | 0755, 0, "", kRoot, &d), 0);
  ASSERT_EQ(fs_->do_make(d.ino, "sub", S_IFDIR | 0700, 0, "", kRoot, &sub), 0);
  auto content = [](int i) { return std::string(1000 + i, static_cast<char>('a' + i)); };
  for (int i = 0; i < 20; i++) {
    ASSERT_EQ(write_new(i % 2 ? sub.ino : d.ino, ("f" + std::to_string(i)).c_str(), content(i)), 0);
  }
  ASSERT_EQ(fs_->do_setxattr(sub.ino, "user.x", "1", 0), 0);
  ASSERT_EQ(fs_->do_link(lookup(d.ino, "f0"), kRootIno, "l", &e), 0);
  const uint64_t seq = store_->next_seq();
  ASSERT_EQ(fs_->do_rename(kRootIno, "d", kRootIno, "e", 0), 0);
  EXPECT_GT(store_->next_seq() - seq, 3u) << "one transaction: the test needs several";
  auto check = [&](const char* when) {
    SCOPED_TRACE(when);
    EXPECT_EQ(lookup(kRootIno, "d"), 0u);
    const Ino ie = lookup(kRootIno, "e"), is = lookup(ie, "sub");
    ASSERT_NE(is, 0u);
    for (int i = 0; i < 20; i++) {
      EXPECT_EQ(read(lookup(i % 2 ? is : ie, ("f" + std::to_string(i)).c_str())), content(i)) << i;
    }
    std::string x;
    EXPECT_EQ(fs_->do_getxattr(is, "user.x", &x), 0);
    EXPECT_EQ(x, "1");
    EXPECT_EQ(lookup(ie, "f0"), lookup(kRootIno, "l"));
    int left = 0;
    for (std::string_view kind : {std::string_view(), kMetaPrefix, kDirPrefix, kXattrPrefix}) {
      const std::string prefix = std::string(kind) + "d";
      ASSERT_TRUE(store_->scan(prefix, [&](std::string_view, std::string_view) {
        left++;
        return true;
      }).ok());
    }
    EXPECT_EQ(left, 0) << "keys left under the old name";
    std::string v;
    EXPECT_TRUE(store_->get(kRenameKey, &v).is_not_found());
  };
  check("renamed");
  fs_ = mount();
  check("after a remount");

  // Stopped after its first transaction: the key names the rename, the
  // directory's marker and some keys below it moved, the others not.
  const std::string marker = std::string(kDirPrefix) + "e";
  std::string m;
  ASSERT_TRUE(store_->get(marker, &m).ok());
  ASSERT_TRUE(store_->put(std::string(kDirPrefix) + "g", m).ok());
  ASSERT_TRUE(store_->remove(marker).ok());
  int moved = 0;
  ASSERT_TRUE(store_->scan("e/sub/", [&](std::string_view k, std::string_view v) {
    if (moved++ % 2 == 0) {
      EXPECT_TRUE(store_->put("g/sub/" + std::string(k.substr(6)), v).ok());
      EXPECT_TRUE(store_->remove(k).ok());
    }
    return true;
  }).ok());
  std::string intent(4, '\0');
  put_le(&intent, 0, uint32_t{1});
  intent += "eg";
  ASSERT_TRUE(store_->put(kRenameKey, intent).ok());
  fs_ = mount();
  const Ino ig = lookup(kRootIno, "g");
  EXPECT_EQ(lookup(kRootIno, "e"), 0u);
  ASSERT_NE(ig, 0u);
  for (int i = 1; i < 20; i += 2) {
    EXPECT_EQ(read(lookup(lookup(ig, "sub"), ("f" + std::to_string(i)).c_str())), content(i)) << i;
  }
  EXPECT_EQ(read(lookup(ig, "f2")), content(2));
  std::string v;
  EXPECT_TRUE(store_->get(kRenameKey, &v).is_not_found());

  // A key below that the new name would make longer than the store takes:
  // refused before anything moves.
  fuse_entry_param a;
  ASSERT_EQ(fs_->do_make(kRootIno, "a", S_IFDIR | 0755, 0, "", kRoot, &a), 0);
  const std::string deep(240, 'n');
  ASSERT_EQ(write_new(a.ino, deep.c_str(), "x"), 0);
  EXPECT_EQ(fs_->do_rename(kRootIno, "a", kRootIno, "abcdefghijklmnopqrst", 0), ENAMETOOLONG);
  EXPECT_EQ(read(lookup(lookup(kRootIno, "a"), deep.c_str())), "x");

  // Damaged: too short, or naming a directory below the other (which would
  // move keys forever). The mount says so and changes nothing.
  std::string below(4, '\0');
  put_le(&below, 0, uint32_t{1});
  below += "aa/x";
  for (const std::string& v : {std::string("xy"), below}) {
    fs_.reset();
    auto s = kv::Store::open(path_, options_);
    ASSERT_TRUE(s.ok());
    ASSERT_TRUE((*s)->put(kRenameKey, v).ok());
    Fs damaged(std::move(*s), MountOptions{});
    pm::Status st = damaged.build_index();
    EXPECT_EQ(st.code(), pm::Code::kCorruption) << st.to_string();
    EXPECT_NE(st.message().find("rename"), std::string::npos) << st.to_string();
  }
}

// What the mount shows must be what it stored: a rename within one
// directory once set that directory's times from a second clock reading
// (the stored one differed: a remount changed its mtime); and a read-only
// open with O_TRUNC (which the kernel leaves to us) truncated nothing.
TEST_F(FsTest, ARenameInOneDirectoryAndAReadOnlyTruncatingOpenAreWhatARemountShows) {
  fs_ = mount();
  ASSERT_NE(fs_, nullptr);
  fuse_entry_param e;
  ASSERT_EQ(fs_->do_make(kRootIno, "d", S_IFDIR | 0755, 0, "", kRoot, &e), 0);
  const Ino d = e.ino;
  ASSERT_EQ(write_new(d, "a", "x"), 0);
  ASSERT_EQ(write_new(kRootIno, "t", "hello\n"), 0);
  ASSERT_EQ(fs_->do_rename(d, "a", d, "b", 0), 0);
  struct stat before, after;
  ASSERT_EQ(fs_->do_getattr(d, &before), 0);
  Handle* h = nullptr;
  bool changed = false;
  ASSERT_EQ(fs_->do_open(lookup(kRootIno, "t"), O_RDONLY | O_TRUNC, kRoot, &h, &changed), 0);
  fs_->do_release(h);
  fs_ = mount();
  ASSERT_NE(fs_, nullptr);
  const Ino d2 = lookup(kRootIno, "d", &after);
  ASSERT_NE(d2, 0u);
  EXPECT_EQ(after.st_mtim.tv_nsec, before.st_mtim.tv_nsec);
  EXPECT_EQ(after.st_mtim.tv_sec, before.st_mtim.tv_sec);
  struct stat t;
  ASSERT_NE(lookup(kRootIno, "t", &t), 0u);
  EXPECT_EQ(t.st_size, 0);
  EXPECT_EQ(read(lookup(kRootIno, "t")), "");
  fs_.reset();
}

// A session that ends with a file still open for writing (a SIGTERM to
// the daemon) drops what that writer staged, as a kill does: an O_TRUNC
// rewrite cut off by the stop replaced the stored file. A handle whose
// descriptor was closed, its release still on its way, is released as
// before.
TEST_F(FsTest, TheEndOfASessionDropsWhatAWriterThatNeverClosedStaged) {
  fs_ = mount();
  ASSERT_NE(fs_, nullptr);
  ASSERT_EQ(write_new(kRootIno, "f", "stored"), 0);
  ASSERT_EQ(write_new(kRootIno, "g", "old"), 0);
  bool changed = false;
  Handle* f = nullptr;
  ASSERT_EQ(fs_->do_open(lookup(kRootIno, "f"), O_WRONLY | O_TRUNC, kRoot, &f, &changed), 0);
  ASSERT_EQ(fs_->do_write(f, "cut off", 7, 0, kRoot, &changed), 0);
  Handle* g = nullptr;
  ASSERT_EQ(fs_->do_open(lookup(kRootIno, "g"), O_WRONLY | O_TRUNC, kRoot, &g, &changed), 0);
  ASSERT_EQ(fs_->do_write(g, "new", 3, 0, kRoot, &changed), 0);
  ASSERT_EQ(fs_->do_flush(g), 0);  // closed; no release comes for f or g
  fs_ = mount();
  ASSERT_NE(fs_, nullptr);
  EXPECT_EQ(read(lookup(kRootIno, "f")), "stored");
  EXPECT_EQ(read(lookup(kRootIno, "g")), "new");
  fs_.reset();
}

// Mapped pages the kernel writes back (through a descriptor of its
// choice) are stored by any descriptor's close, and at their offset even
// through an O_APPEND descriptor.
TEST_F(FsTest, PagesWrittenBackAreStoredByAnyClose) {
  fs_ = mount();
  ASSERT_NE(fs_, nullptr);
  ASSERT_EQ(write_new(kRootIno, "m", "0123456789"), 0);
  const Ino ino = lookup(kRootIno, "m");
  Handle* mapped = open(ino, O_RDWR | O_APPEND);
  Handle* closer = open(ino, O_RDWR);
  ASSERT_TRUE(mapped != nullptr && closer != nullptr);
  ASSERT_EQ(write(mapped, "AB", 3, /*page_cache=*/true), 0);
  ASSERT_EQ(fs_->do_flush(closer), 0);  // wrote nothing itself
  fs_ = mount();  // the session ends: mapped was never closed
  ASSERT_NE(fs_, nullptr);
  EXPECT_EQ(read(lookup(kRootIno, "m")), "012AB56789");
  fs_.reset();
}

// A file removed while open keeps its extended attributes for its
// descriptors, as tmpfs does: they read and set them on (they used to read
// none, and a set succeeded and was lost, a user trial), and the last
// release lets them go.
TEST_F(FsTest, AnOpenFileRemovedKeepsItsExtendedAttributes) {
  fs_ = mount();
  ASSERT_NE(fs_, nullptr);
  ASSERT_EQ(write_new(kRootIno, "x", "data"), 0);
  const Ino ino = lookup(kRootIno, "x");
  ASSERT_EQ(fs_->do_setxattr(ino, "user.a", "1", 0), 0);
  Handle* h = open(ino, O_RDWR);
  ASSERT_NE(h, nullptr);
  ASSERT_EQ(fs_->do_remove(kRootIno, "x", false), 0);
  std::string v;
  EXPECT_EQ(fs_->do_getxattr(ino, "user.a", &v), 0);
  EXPECT_EQ(v, "1");
  ASSERT_EQ(fs_->do_setxattr(ino, "user.b", "2", 0), 0);
  std::string names;
  ASSERT_EQ(fs_->do_listxattr(ino, &names), 0);
  EXPECT_EQ(names, std::string("user.a\0user.b\0", 14));
  ASSERT_EQ(fs_->do_removexattr(ino, "user.a"), 0);
  EXPECT_EQ(fs_->do_getxattr(ino, "user.a", &v), ENODATA);
  fs_->do_release(h);
  fs_.reset();
}

// A descriptor's close stores only what it changed: the late release of a
// descriptor closed before an O_TRUNC open (the kernel sends releases
// asynchronously: 19 of 299 close-and-reopen cycles in a user trial), or
// the close of another one that wrote nothing, stored the rewrite that
// open had begun, and a crash then left the file empty or half written.
// An fsync still stores what every descriptor wrote.
TEST_F(FsTest, AnotherDescriptorsCloseDoesNotStoreAnUnfinishedRewrite) {
  fs_ = mount();
  ASSERT_NE(fs_, nullptr);
  ASSERT_EQ(write_new(kRootIno, "f", "old content"), 0);
  const Ino ino = lookup(kRootIno, "f");
  Handle* first = open(ino, O_RDWR);
  ASSERT_NE(first, nullptr);
  ASSERT_EQ(write(first, "OLD", 0), 0);
  ASSERT_EQ(fs_->do_flush(first), 0);  // "OLD content" stored
  Handle* rewrite = open(ino, O_WRONLY | O_TRUNC);
  ASSERT_NE(rewrite, nullptr);
  fs_->do_release(first);  // late: after the O_TRUNC open
  ASSERT_EQ(write(rewrite, "NEW-PART", 0), 0);
  Handle* other = open(ino, O_RDWR);
  ASSERT_NE(other, nullptr);
  ASSERT_EQ(fs_->do_flush(other), 0);  // wrote nothing
  fs_->do_release(other);
  fs_ = mount();  // the session ends with the rewrite unfinished
  ASSERT_NE(fs_, nullptr);
  EXPECT_EQ(read(lookup(kRootIno, "f")), "OLD content");
  rewrite = open(ino, O_WRONLY | O_TRUNC);
  ASSERT_NE(rewrite, nullptr);
  ASSERT_EQ(write(rewrite, "NEW", 0), 0);
  other = open(ino, O_RDONLY);
  ASSERT_NE(other, nullptr);
  ASSERT_EQ(fs_->do_fsync(other), 0);  // a reader's fsync: durable is what was written
  fs_ = mount();
  ASSERT_NE(fs_, nullptr);
  EXPECT_EQ(read(lookup(kRootIno, "f")), "NEW");
  fs_.reset();
}

}  // namespace
}  // namespace pmfs
