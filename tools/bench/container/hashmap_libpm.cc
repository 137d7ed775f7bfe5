#include "bench/container/hashmap_libpm.h"

#include <cstddef>
#include <cstring>

namespace pm::bench {

struct LibpmHashMap::Node {
  Node* next;
  unsigned char key[kKeyBytes];
  unsigned char value[kValueBytes];
};

struct LibpmHashMap::Root {
  uint64_t nbuckets;
  uint64_t count;
  Node** buckets;
};

Result<LibpmHashMap> LibpmHashMap::create(Container& c, uint64_t nbuckets, bool announce_writes) {
  static_assert(sizeof(Node) == 128, "a node is next + key + value, 8-aligned");
  Result<void*> root_mem = c.alloc(sizeof(Root));
  if (!root_mem.ok()) return root_mem.status();
  Result<void*> buckets = c.alloc(nbuckets * sizeof(Node*));
  if (!buckets.ok()) return buckets.status();
  // alloc() leaves contents unspecified: an empty bucket must be written null.
  c.will_write(*buckets, nbuckets * sizeof(Node*));
  std::memset(*buckets, 0, nbuckets * sizeof(Node*));
  auto* root = static_cast<Root*>(*root_mem);
  c.will_write(root, sizeof *root);
  *root = Root{nbuckets, 0, static_cast<Node**>(*buckets)};
  PM_TRY(c.set_root(root, "bench.hashmap"));
  PM_TRY(c.commit());
  return LibpmHashMap(&c, root, announce_writes);
}

Status LibpmHashMap::insert(const unsigned char key[kKeyBytes],
                            const unsigned char value[kValueBytes]) {
  Node** slot = &root_->buckets[hash_key(key) & (root_->nbuckets - 1)];
  for (Node* n = *slot; n != nullptr; n = n->next) {
    if (std::memcmp(n->key, key, kKeyBytes) == 0) {
      announce(n->value, kValueBytes);
      std::memcpy(n->value, value, kValueBytes);
      return Status();
    }
  }
  Result<void*> mem = c_->alloc(sizeof(Node));
  if (!mem.ok()) return mem.status();
  auto* n = static_cast<Node*>(*mem);
  announce(n, sizeof *n);
  n->next = *slot;
  std::memcpy(n->key, key, kKeyBytes);
  std::memcpy(n->value, value, kValueBytes);
  announce(slot, sizeof *slot);
  *slot = n;
  announce(&root_->count, sizeof root_->count);
  root_->count++;
  return Status();
}

const unsigned char* LibpmHashMap::get(const unsigned char key[kKeyBytes]) const {
  for (const Node* n = root_->buckets[hash_key(key) & (root_->nbuckets - 1)]; n != nullptr;
       n = n->next) {
    if (std::memcmp(n->key, key, kKeyBytes) == 0) return n->value;
  }
  return nullptr;
}

uint64_t LibpmHashMap::size() const { return root_->count; }

}  // namespace pm::bench
