#include "bench/container/hashmap_pmemobj.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>

namespace pm::bench {

namespace {

constexpr char kLayout[] = "pm-bench-hashmap";
constexpr uint64_t kNodeType = 1;
constexpr uint64_t kBucketsType = 2;

Status pmemobj_error(const std::string& what) {
  return Status::io_error(what + ": " + pmemobj_errormsg());
}

}  // namespace

struct PmemobjHashMap::Node {
  PMEMoid next;
  unsigned char key[kKeyBytes];
  unsigned char value[kValueBytes];
};

struct PmemobjHashMap::Root {
  uint64_t nbuckets;
  uint64_t count;
  PMEMoid buckets;  // PMEMoid[nbuckets]
};

Result<std::unique_ptr<PmemobjHashMap>> PmemobjHashMap::create(const std::string& path,
                                                               uint64_t pool_bytes,
                                                               uint64_t nbuckets) {
  static_assert(sizeof(Node) == 136, "a node is next + key + value, 8-aligned");
  PMEMobjpool* pop = pmemobj_create(path.c_str(), kLayout, pool_bytes, 0600);
  if (pop == nullptr) return pmemobj_error("pmemobj_create " + path);
  std::unique_ptr<PmemobjHashMap> map(new PmemobjHashMap(pop, nullptr));
  PMEMoid root_oid = pmemobj_root(pop, sizeof(Root));
  if (OID_IS_NULL(root_oid)) return pmemobj_error("pmemobj_root");
  auto* root = static_cast<Root*>(pmemobj_direct(root_oid));
  // The atomic allocation publishes the bucket array in the root itself.
  if (pmemobj_zalloc(pop, &root->buckets, nbuckets * sizeof(PMEMoid), kBucketsType) != 0) {
    return pmemobj_error(fmt::format("pmemobj_zalloc of {} buckets", nbuckets));
  }
  root->nbuckets = nbuckets;
  pmemobj_persist(pop, &root->nbuckets, sizeof root->nbuckets);
  map->root_ = root;
  return map;
}

PmemobjHashMap::~PmemobjHashMap() { pmemobj_close(pop_); }

// pmemobj_tx_begin without a jmp_buf: a failing call aborts the transaction
// and returns an error instead of longjmp-ing, so no local needs volatile.
template <typename Body>
Status PmemobjHashMap::run_tx(Body body) {
  int err = pmemobj_tx_begin(pop_, nullptr, TX_PARAM_NONE);
  if (err == 0) {
    err = body();
    if (pmemobj_tx_stage() == TX_STAGE_WORK) {
      if (err == 0) {
        pmemobj_tx_commit();
      } else {
        pmemobj_tx_abort(err);
      }
    }
  }
  int end = pmemobj_tx_end();
  if (end == 0 && err == 0) return Status();
  return Status::io_error(fmt::format("pmemobj transaction aborted: {} ({})",
                                      std::strerror(end ? end : err), pmemobj_errormsg()));
}

int PmemobjHashMap::insert_in_tx(const unsigned char key[kKeyBytes],
                                 const unsigned char value[kValueBytes]) {
  auto* buckets = static_cast<PMEMoid*>(pmemobj_direct(root_->buckets));
  PMEMoid* slot = &buckets[hash_key(key) & (root_->nbuckets - 1)];
  for (PMEMoid o = *slot; !OID_IS_NULL(o);) {
    auto* n = static_cast<Node*>(pmemobj_direct(o));
    if (std::memcmp(n->key, key, kKeyBytes) == 0) {
      if (int err = pmemobj_tx_add_range_direct(n->value, kValueBytes)) return err;
      std::memcpy(n->value, value, kValueBytes);
      return 0;
    }
    o = n->next;
  }
  // Not zeroed: every byte is written below. A new object needs no undo
  // range; the transaction flushes it at commit.
  PMEMoid o = pmemobj_tx_alloc(sizeof(Node), kNodeType);
  if (OID_IS_NULL(o)) return pmemobj_tx_errno() ? pmemobj_tx_errno() : ENOMEM;
  auto* n = static_cast<Node*>(pmemobj_direct(o));
  n->next = *slot;
  std::memcpy(n->key, key, kKeyBytes);
  std::memcpy(n->value, value, kValueBytes);
  if (int err = pmemobj_tx_add_range_direct(slot, sizeof *slot)) return err;
  *slot = o;
  if (int err = pmemobj_tx_add_range_direct(&root_->count, sizeof root_->count)) return err;
  root_->count++;
  return 0;
}

Status PmemobjHashMap::insert(const unsigned char key[kKeyBytes],
                              const unsigned char value[kValueBytes]) {
  return run_tx([&] { return insert_in_tx(key, value); });
}

Status PmemobjHashMap::insert_range(uint64_t first, uint64_t n) {
  return run_tx([&] {
    unsigned char key[kKeyBytes], value[kValueBytes];
    for (uint64_t i = first; i < first + n; i++) {
      make_key(i, key);
      make_value(i, value);
      if (int err = insert_in_tx(key, value)) return err;
    }
    return 0;
  });
}

const unsigned char* PmemobjHashMap::get(const unsigned char key[kKeyBytes]) const {
  const auto* buckets = static_cast<const PMEMoid*>(pmemobj_direct(root_->buckets));
  for (PMEMoid o = buckets[hash_key(key) & (root_->nbuckets - 1)]; !OID_IS_NULL(o);) {
    const auto* n = static_cast<const Node*>(pmemobj_direct(o));
    if (std::memcmp(n->key, key, kKeyBytes) == 0) return n->value;
    o = n->next;
  }
  return nullptr;
}

uint64_t PmemobjHashMap::size() const { return root_->count; }

}  // namespace pm::bench
