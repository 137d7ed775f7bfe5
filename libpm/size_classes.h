// Size classes for small objects (up to 32 KiB): 16-byte steps to 128, then
// eight classes per doubling (at most 12.5% rounding). Each class has a slab
// span of 1-64 pages chosen for low tail waste. Deterministic: part of the
// on-file format.
#ifndef LIBPM_SIZE_CLASSES_H_
#define LIBPM_SIZE_CLASSES_H_

#include <cstdint>

namespace pm {

inline constexpr uint64_t kMaxSmall = 32768;

struct SizeClass {
  uint32_t size;       // object bytes
  uint32_t pages;      // slab span
  uint32_t objects;    // objects per slab
  uint32_t first_off;  // offset of the first object in the span
};

int size_class_count();
const SizeClass& size_class(int c);
// The smallest class holding n bytes. REQUIRES: 0 < n <= kMaxSmall.
int size_class_for(uint64_t n);

}  // namespace pm

#endif  // LIBPM_SIZE_CLASSES_H_
