// pm::RawRegion: the bytes of a container file that lie outside its heap
// (Options::raw_bytes, fixed at create), for logs that cannot afford a
// commit per record (the kvstore's cross-referencing logs).
//
// The container neither tracks nor journals these bytes: commit() and
// abort() do not touch them. The owner writes them with write(), makes them
// durable with persist(), and must itself recognise after a crash what
// survived (checksums, positions). Until persist() returns, any subset of
// the bytes written may have reached the file, in any order.
//
// The file space is reserved when the container is created, so writes never
// need new blocks (no SIGBUS on a full disk).
//
// Thread safety: calls on disjoint ranges may run concurrently with each
// other, with commit() and with growth; none takes the commit gate.
// Lifetime: owned by its container.
#ifndef PM_RAW_REGION_H_
#define PM_RAW_REGION_H_

#include <cstddef>
#include <cstdint>

#include "pm/status.h"

namespace pm {

class RawRegion {
 public:
  virtual ~RawRegion() = default;

  virtual uint64_t size() const = 0;
  // kInvalidArgument when the range is outside the region; kReadOnly on a
  // container opened read-only.
  virtual Status write(uint64_t off, const void* src, size_t n) = 0;
  // Durable on return: cache-line flush and fence on pmem, msync elsewhere
  // (kIOError when it fails: what was written may be lost).
  virtual Status persist(uint64_t off, size_t n) = 0;
  virtual Status read(uint64_t off, void* dst, size_t n) const = 0;
};

}  // namespace pm

#endif  // PM_RAW_REGION_H_
