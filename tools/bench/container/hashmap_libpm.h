// LibpmHashMap: a chained hash map that lives in a pm::Container and links
// its nodes with raw pointers. Durability is the caller's: it calls
// Container::commit() as often as it wants inserts to be durable.
//
// Layout (the same design as PmemobjHashMap): a root, a bucket array of
// next-power-of-two-of-N slots fixed at creation, nodes of next + 16-byte key
// + 100-byte value, new nodes pushed at the head of their chain.
//
// Thread safety: none; one thread uses a map. The map's pointers are valid
// while its container is open.
#ifndef TOOLS_BENCH_CONTAINER_HASHMAP_LIBPM_H_
#define TOOLS_BENCH_CONTAINER_HASHMAP_LIBPM_H_

#include <cstdint>

#include "bench/common/workload.h"
#include "pm/container.h"

namespace pm::bench {

class LibpmHashMap {
 public:
  // Allocates an empty map of `nbuckets` (a power of two) buckets in `c`,
  // makes it the root named "bench.hashmap" and commits. With
  // `announce_writes` every store is announced with will_write() first, as
  // the hints tracker requires. Errors: those of alloc() and commit().
  static Result<LibpmHashMap> create(Container& c, uint64_t nbuckets, bool announce_writes);

  // Inserts or overwrites. Not durable until the caller commits.
  // Errors: kNoSpace from alloc().
  Status insert(const unsigned char key[kKeyBytes], const unsigned char value[kValueBytes]);

  // The stored value (kValueBytes), or nullptr. Valid until the key is
  // overwritten or the container closes.
  const unsigned char* get(const unsigned char key[kKeyBytes]) const;

  uint64_t size() const;

 private:
  struct Node;
  struct Root;
  LibpmHashMap(Container* c, Root* root, bool announce) : c_(c), root_(root), announce_(announce) {}
  void announce(const void* p, size_t n) {
    if (announce_) c_->will_write(p, n);
  }

  Container* c_;
  Root* root_;
  bool announce_;
};

}  // namespace pm::bench

#endif  // TOOLS_BENCH_CONTAINER_HASHMAP_LIBPM_H_
