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

Node* InodeTable::add(Node* parent, std::string name, std::string key, bool dir, const Meta& m) {
  assert(parent->is_dir() && child(*parent, name) == nullptr);
  auto n = std::make_unique<Node>();
  Node* raw = n.get();
  raw->ino = next_ino_++;
  raw->parent = parent->ino;
  raw->key = std::move(key);
  raw->meta = m;
  if (dir) raw->dir = std::make_unique<DirEntries>();
  DirEntries& d = *parent->dir;
  const uint64_t cookie = cookie_of(raw->ino);
  d.by_cookie.emplace(cookie, raw->ino);
  d.by_name.emplace(name, std::make_pair(cookie, raw->ino));
  if (dir) d.subdirs++;
  raw->name = std::move(name);
  nodes_.emplace(raw->ino, std::move(n));
  return raw;
}

void InodeTable::detach(Node* n) {
  Node* p = get(n->parent);
  if (n->parent == 0 || p == nullptr || n->ino == kRootIno) return;
  DirEntries& d = *p->dir;
  auto it = d.by_name.find(n->name);
  assert(it != d.by_name.end() && it->second.second == n->ino);
  d.by_cookie.erase(it->second.first);
  d.by_name.erase(it);
  if (n->is_dir()) d.subdirs--;
  n->parent = 0;
}

void InodeTable::move(Node* n, Node* new_parent, std::string new_name, std::string new_key) {
  detach(n);
  DirEntries& d = *new_parent->dir;
  const uint64_t cookie = cookie_of(n->ino);
  d.by_cookie.emplace(cookie, n->ino);
  d.by_name.emplace(new_name, std::make_pair(cookie, n->ino));
  if (n->is_dir()) d.subdirs++;
  n->parent = new_parent->ino;
  n->name = std::move(new_name);
  n->key = std::move(new_key);
  // Rewrite the keys below n, depth first.
  std::vector<Node*> pending{n};
  while (!pending.empty()) {
    Node* dir = pending.back();
    pending.pop_back();
    if (!dir->is_dir()) continue;
    for (const auto& [cookie, ino] : dir->dir->by_cookie) {
      Node* c = get(ino);
      c->key = child_key(dir->key, *decode_name(c->name));
      pending.push_back(c);
    }
  }
}

void InodeTable::erase_if_unused(Node* n) {
  if (n->parent == 0 && n->nlookup.load() == 0 && n->open_count == 0 && n->ino != kRootIno) {
    nodes_.erase(n->ino);
  }
}

Node* InodeTable::ensure_dir(std::string_view key, const Meta& m) {
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
      next = add(cur, std::move(name), prefix, /*dir=*/true, m);
    } else if (!next->is_dir()) {
      return nullptr;
    }
    cur = next;
    if (slash == std::string_view::npos) return cur;
    start = slash + 1;
  }
}

}  // namespace pmfs
