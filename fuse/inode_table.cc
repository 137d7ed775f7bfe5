#include "fuse/inode_table.h"

#include <sys/stat.h>

#include <cassert>
#include <utility>
#include <vector>

namespace pmfs {

InodeTable::InodeTable(const Meta& root) {
  auto n = std::make_unique<Node>();
  n->ino = kRootIno;
  n->parent = kRootIno;
  n->meta = root;
  n->dir = std::make_unique<DirEntries>();
  nodes_.emplace(kRootIno, std::move(n));
}

Node* InodeTable::get(Ino ino) const {
  auto it = nodes_.find(ino);
  return it == nodes_.end() ? nullptr : it->second.get();
}

Node* InodeTable::child(const Node& parent, std::string_view name) const {
  if (!parent.is_dir()) return nullptr;
  auto it = parent.dir->by_name.find(std::string(name));
  return it == parent.dir->by_name.end() ? nullptr : get(it->second.second);
}

bool InodeTable::insert_entry(DirEntries* d, std::string name, uint64_t cookie, Ino ino) {
  auto [it, inserted] = d->by_name.emplace(std::move(name), std::make_pair(cookie, ino));
  if (!inserted) return false;
  // New entries (add, link) take the newest inode number's cookie, the
  // largest yet: the hint makes their insert O(1). A moved entry keeps its
  // older cookie; the hint is then ignored.
  d->by_cookie.emplace_hint(d->by_cookie.end(), cookie, &*it);
  return true;
}

Node* InodeTable::add(Node* parent, std::string name, std::string key, bool dir, const Meta& m) {
  assert(parent->is_dir());
  const bool stable = m.ino > kRootIno && m.ino < kStableInoEnd && stable_ino_free(m.ino);
  const Ino ino = stable ? m.ino : next_ino_;
  if (!insert_entry(parent->dir.get(), name, cookie_of(ino), ino)) return nullptr;
  if (!stable) next_ino_++;
  auto n = std::make_unique<Node>();
  Node* raw = n.get();
  raw->ino = ino;
  raw->parent = parent->ino;
  raw->key = std::move(key);
  raw->meta = m;
  if (!stable) raw->meta.ino = 0;  // another node's (a copied record): not written on
  if (dir) raw->dir = std::make_unique<DirEntries>();
  if (dir) parent->dir->subdirs++;
  raw->name = std::move(name);
  nodes_.emplace(ino, std::move(n));
  return raw;
}

void InodeTable::link(Node* n, Node* parent, std::string name) {
  assert(!n->is_dir() && n->linked && n->nlink > 0 && parent->is_dir());
  [[maybe_unused]] const bool inserted =
      insert_entry(parent->dir.get(), std::move(name), cookie_of(next_ino_++), n->ino);
  assert(inserted);
  n->nlink++;
}

Node* InodeTable::unlink(Node* parent, std::string_view name) {
  DirEntries& d = *parent->dir;
  auto it = d.by_name.find(std::string(name));
  assert(it != d.by_name.end());
  Node* n = get(it->second.second);
  d.by_cookie.erase(it->second.first);
  const bool gone = n->is_dir() || --n->nlink == 0;
  if (n->is_dir()) d.subdirs--;
  if (gone) {
    n->nlink = 0;
    n->parent = 0;
  }  // else a linked file: parent and name only say it has a name
  d.by_name.erase(it);
  return n;
}

void InodeTable::move(Node* parent, std::string_view name, Node* new_parent, std::string new_name,
                      std::string new_key) {
  DirEntries& d = *parent->dir;
  auto it = d.by_name.find(std::string(name));
  assert(it != d.by_name.end());
  const auto [cookie, ino] = it->second;
  d.by_cookie.erase(cookie);
  d.by_name.erase(it);
  Node* n = get(ino);
  if (n->is_dir()) d.subdirs--, new_parent->dir->subdirs++;
  [[maybe_unused]] const bool inserted = insert_entry(new_parent->dir.get(), new_name, cookie, ino);
  assert(inserted);
  if (n->linked) return;  // its key is its inode's; its names are entries only
  n->parent = new_parent->ino;
  n->name = std::move(new_name);
  n->key = std::move(new_key);
  // Rewrite the keys below n, depth first.
  std::vector<Node*> pending{n};
  while (!pending.empty()) {
    Node* dir = pending.back();
    pending.pop_back();
    if (!dir->is_dir()) continue;
    for (const auto& [child_name, ci] : dir->dir->by_name) {
      Node* c = get(ci.second);
      if (c->linked) continue;
      c->key = child_key(dir->key, *decode_name(child_name));
      pending.push_back(c);
    }
  }
}

void InodeTable::erase_if_unused(Node* n) {
  if (n->parent == 0 && n->nlookup.load() == 0 && n->open_count == 0 && n->ino != kRootIno) {
    if (n->ino < kStableInoEnd) retired_.insert(n->ino);
    nodes_.erase(n->ino);
  }
}

Node* InodeTable::ensure_dir(std::string_view key, const Meta& m, const Meta* last) {
  Node* cur = get(kRootIno);
  if (key.empty()) return cur;
  size_t start = 0;
  for (;;) {
    const size_t slash = key.find('/', start);
    const std::string_view comp =
        key.substr(start, slash == std::string_view::npos ? std::string_view::npos : slash - start);
    const std::string prefix(key.substr(0, slash));
    std::string name = encode_name(comp);
    Node* next = child(*cur, name);
    if (next == nullptr) {
      const bool at_key = slash == std::string_view::npos;
      next = add(cur, std::move(name), prefix, /*dir=*/true, at_key && last ? *last : m);
    } else if (!next->is_dir()) {
      return nullptr;
    }
    cur = next;
    if (slash == std::string_view::npos) return cur;
    start = slash + 1;
  }
}

}  // namespace pmfs
