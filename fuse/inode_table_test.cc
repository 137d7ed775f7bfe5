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

// A record's stable number is the node's id unless another node has it, or
// had it in this table (a file handle names an id: never two files).
TEST(InodeTableTest, AStableNumberNamesOneFileOnly) {
  InodeTable t(kDir);
  Node* root = t.get(kRootIno);
  Meta m = kFile;
  m.ino = 7;
  Node* a = t.add(root, "a", "a", false, m);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->ino, 7u);
  Node* b = t.add(root, "b", "b", false, m);  // a copied record
  ASSERT_NE(b, nullptr);
  EXPECT_GE(b->ino, kStableInoEnd);
  EXPECT_EQ(b->meta.ino, 0u);  // not written on
  t.unlink(root, "a");
  t.erase_if_unused(a);
  EXPECT_FALSE(t.stable_ino_free(7));
  Node* c = t.add(root, "c", "c", false, m);
  ASSERT_NE(c, nullptr);
  EXPECT_GE(c->ino, kStableInoEnd);
  m.ino = 8;
  EXPECT_EQ(t.add(root, "d", "d", false, m)->ino, 8u);
}

TEST(InodeTableTest, FileInTheWayOfADirectoryIsReported) {
  InodeTable t(kDir);
  t.add(t.get(kRootIno), "f", "f", false, kFile);
  EXPECT_EQ(t.ensure_dir("f/x", kDir), nullptr);
}

TEST(InodeTableTest, ANameTakenAddsNothing) {
  InodeTable t(kDir);
  Node* root = t.get(kRootIno);
  Node* d = t.ensure_dir("a", kDir);
  const uint64_t nodes = t.nodes();
  EXPECT_EQ(t.add(root, "a", "a", false, kFile), nullptr);  // a directory has the name
  EXPECT_EQ(t.nodes(), nodes);
  EXPECT_EQ(t.child(*root, "a"), d);
  EXPECT_EQ(root->dir->by_cookie.size(), 1u);
  Node* f = t.add(root, "f", "f", false, kFile);
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->ino, d->ino + 1);  // the refused add used no inode number
}

TEST(InodeTableTest, CookiesStayStableWhenEntriesGo) {
  InodeTable t(kDir);
  Node* root = t.get(kRootIno);
  t.add(root, "a", "a", false, kFile);
  t.add(root, "b", "b", false, kFile);
  const uint64_t cookie_b = root->dir->by_name.at("b").first;
  t.unlink(root, "a");
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
  t.move(root, "a", root, "a2", "a2");
  EXPECT_EQ(root->dir->by_name.at("a2").first, cookie_a);
  EXPECT_EQ(a->key, "a2");
  t.move(root, "a2", d, "a", "d/a");  // out and back: the same cookie again
  t.move(d, "a", root, "a3", "a3");
  EXPECT_EQ(root->dir->by_name.at("a3").first, cookie_a);
  EXPECT_EQ(root->dir->by_cookie.size(), 3u);
}

TEST(InodeTableTest, MoveRewritesKeysBelow) {
  InodeTable t(kDir);
  Node* d = t.ensure_dir("x/y", kDir);
  Node* f = t.add(d, "%%", "x/y/", false, kFile);  // the key "x/y/" (empty component)
  t.move(t.get(kRootIno), "x", t.get(kRootIno), "z", "z");
  EXPECT_EQ(d->key, "z/y");
  EXPECT_EQ(f->key, "z/y/");
}

TEST(InodeTableTest, DetachedNodesGoWhenUnreferenced) {
  InodeTable t(kDir);
  Node* f = t.add(t.get(kRootIno), "f", "f", false, kFile);
  const Ino ino = f->ino;
  f->nlookup = 1;
  t.unlink(t.get(kRootIno), "f");
  t.erase_if_unused(f);
  EXPECT_NE(t.get(ino), nullptr);
  f->nlookup = 0;
  t.erase_if_unused(f);
  EXPECT_EQ(t.get(ino), nullptr);
}

// Hard links: each name has a cookie of its own, a linked file's key stays
// its inode key when a directory above a name moves, and the node goes
// with its last name.
TEST(InodeTableTest, LinksAreEntriesOfOneNode) {
  InodeTable t(kDir);
  Node* root = t.get(kRootIno);
  Node* d = t.add(root, "d", "d", true, kDir);
  Node* f = t.add(d, "f", std::string("\0i1", 3), false, kFile);
  f->linked = true;
  t.link(f, d, "g");
  t.link(f, root, "h");
  EXPECT_EQ(f->nlink, 3u);
  EXPECT_EQ(d->dir->by_cookie.size(), 2u);
  EXPECT_NE(d->dir->by_name.at("f").first, d->dir->by_name.at("g").first);
  EXPECT_EQ(t.child(*d, "g"), f);
  t.move(root, "d", root, "e", "e");
  EXPECT_EQ(f->key, std::string("\0i1", 3));
  const Ino ino = f->ino;
  EXPECT_EQ(t.unlink(d, "f"), f);
  EXPECT_EQ(t.unlink(root, "h"), f);
  EXPECT_EQ(f->nlink, 1u);
  EXPECT_NE(f->parent, 0u);
  t.erase_if_unused(f);
  ASSERT_EQ(t.get(ino), f);
  t.unlink(d, "g");
  EXPECT_EQ(f->parent, 0u);
  t.erase_if_unused(f);
  EXPECT_EQ(t.get(ino), nullptr);
}

}  // namespace
}  // namespace pmfs
