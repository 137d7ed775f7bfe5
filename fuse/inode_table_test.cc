#include "fuse/inode_table.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

namespace pmfs {
namespace {

const Meta kDir{S_IFDIR | 0755, 0, 0, 0, 0};
const Meta kFile{S_IFREG | 0644, 0, 0, 0, 0};

TEST(InodeTableTest, EnsureDirCreatesImpliedParents) {
  InodeTable t(kDir);
  Node* c = t.ensure_dir("a/b/c", kDir);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->key, "a/b/c");
  Node* a = t.child(*t.get(kRootIno), "a");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->key, "a");
  EXPECT_EQ(a->dir->subdirs, 1u);
  EXPECT_EQ(t.ensure_dir("a/b/c", kDir), c);
}

TEST(InodeTableTest, FileInTheWayOfADirectoryIsReported) {
  InodeTable t(kDir);
  t.add(t.get(kRootIno), "f", "f", false, kFile);
  EXPECT_EQ(t.ensure_dir("f/x", kDir), nullptr);
}

TEST(InodeTableTest, CookiesStayStableWhenEntriesGo) {
  InodeTable t(kDir);
  Node* root = t.get(kRootIno);
  Node* a = t.add(root, "a", "a", false, kFile);
  t.add(root, "b", "b", false, kFile);
  const uint64_t cookie_b = root->dir->by_name.at("b").first;
  t.detach(a);
  EXPECT_EQ(root->dir->by_name.at("b").first, cookie_b);
  EXPECT_EQ(root->dir->by_cookie.upper_bound(kFirstCookie - 1)->first, cookie_b);
  t.add(root, "a", "a", false, kFile);
  EXPECT_GT(root->dir->by_name.at("a").first, cookie_b);  // new entries go last
}

// generic/736: renaming each entry as it is listed must not list it again.
TEST(InodeTableTest, ARenamedEntryKeepsItsCookie) {
  InodeTable t(kDir);
  Node* root = t.get(kRootIno);
  Node* d = t.add(root, "d", "d", true, kDir);
  Node* a = t.add(root, "a", "a", false, kFile);
  t.add(root, "b", "b", false, kFile);
  const uint64_t cookie_a = root->dir->by_name.at("a").first;
  t.move(a, root, "a2", "a2");
  EXPECT_EQ(root->dir->by_name.at("a2").first, cookie_a);
  t.move(a, d, "a", "d/a");  // out and back: the same cookie again
  t.move(a, root, "a3", "a3");
  EXPECT_EQ(root->dir->by_name.at("a3").first, cookie_a);
  EXPECT_EQ(root->dir->by_cookie.size(), 3u);
}

TEST(InodeTableTest, MoveRewritesKeysBelow) {
  InodeTable t(kDir);
  Node* d = t.ensure_dir("x/y", kDir);
  Node* f = t.add(d, "%%", "x/y/", false, kFile);  // the key "x/y/" (empty component)
  Node* x = t.child(*t.get(kRootIno), "x");
  t.move(x, t.get(kRootIno), "z", "z");
  EXPECT_EQ(d->key, "z/y");
  EXPECT_EQ(f->key, "z/y/");
}

TEST(InodeTableTest, DetachedNodesGoWhenUnreferenced) {
  InodeTable t(kDir);
  Node* f = t.add(t.get(kRootIno), "f", "f", false, kFile);
  const Ino ino = f->ino;
  f->nlookup = 1;
  t.detach(f);
  t.erase_if_unused(f);
  EXPECT_NE(t.get(ino), nullptr);
  f->nlookup = 0;
  t.erase_if_unused(f);
  EXPECT_EQ(t.get(ino), nullptr);
}

}  // namespace
}  // namespace pmfs
