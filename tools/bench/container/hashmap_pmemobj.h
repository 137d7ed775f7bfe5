// PmemobjHashMap: the baseline for LibpmHashMap, written on PMDK's
// libpmemobj C API. Same design: a root, a fixed bucket array, nodes of
// next + 16-byte key + 100-byte value pushed at the head of their chain; the
// links are PMEMoids (16 bytes) resolved with pmemobj_direct().
//
// insert() runs one libpmemobj transaction, so each insert is durable when
// it returns; insert_range() puts many inserts in one transaction.
//
// Thread safety: none; one thread uses a map.
#ifndef TOOLS_BENCH_CONTAINER_HASHMAP_PMEMOBJ_H_
#define TOOLS_BENCH_CONTAINER_HASHMAP_PMEMOBJ_H_

#include <libpmemobj.h>

#include <cstdint>
#include <memory>
#include <string>

#include "bench/common/workload.h"
#include "pm/status.h"

namespace pm::bench {

class PmemobjHashMap {
 public:
  // Creates the pool file `path` (which must not exist) of `pool_bytes` with
  // an empty map of `nbuckets` (a power of two) buckets. kIOError with
  // libpmemobj's message on failure.
  static Result<std::unique_ptr<PmemobjHashMap>> create(const std::string& path,
                                                        uint64_t pool_bytes, uint64_t nbuckets);
  ~PmemobjHashMap();  // closes the pool; the file stays

  PmemobjHashMap(const PmemobjHashMap&) = delete;
  PmemobjHashMap& operator=(const PmemobjHashMap&) = delete;

  // Inserts or overwrites in one transaction: durable on success. kIOError
  // (with the transaction's errno) when the transaction aborted.
  Status insert(const unsigned char key[kKeyBytes], const unsigned char value[kValueBytes]);

  // Inserts keys [first, first + n) of the workload in one transaction.
  Status insert_range(uint64_t first, uint64_t n);

  // The stored value (kValueBytes), or nullptr. Valid until the key is
  // overwritten or the map is destroyed.
  const unsigned char* get(const unsigned char key[kKeyBytes]) const;

  uint64_t size() const;

 private:
  struct Node;
  struct Root;
  PmemobjHashMap(PMEMobjpool* pop, Root* root) : pop_(pop), root_(root) {}

  // Inside a transaction; an error number, the transaction then aborted.
  int insert_in_tx(const unsigned char key[kKeyBytes], const unsigned char value[kValueBytes]);
  template <typename Body>
  Status run_tx(Body body);

  PMEMobjpool* pop_;
  Root* root_;
};

}  // namespace pm::bench

#endif  // TOOLS_BENCH_CONTAINER_HASHMAP_PMEMOBJ_H_
