// EscapeClassifier: decides whether a 64-bit value found in a persistent
// object is a pointer into volatile memory. A value counts when it falls in
// a mapping of this process other than the container's own reservation
// (the DRAM heap, a stack, a library), or, when asked to (pointers written by
// another process, `pm check`), in the ranges where Linux on x86-64 places
// the brk heap of PIE programs and mmap'ed memory and stacks. Mappings with
// no access (reservations, guard pages; TSan reserves most of the address
// space so) hold no objects, and under ASan its shadow ranges are not
// volatile memory either: no program points there, and small integer pairs
// and string bytes land there.
#ifndef LIBPM_ESCAPE_CLASSIFIER_H_
#define LIBPM_ESCAPE_CLASSIFIER_H_

#include <cstdint>
#include <string>
#include <vector>

namespace pm {

class EscapeClassifier {
 public:
  // Reads /proc/self/maps, leaving out [skip_begin, skip_end).
  EscapeClassifier(uint64_t skip_begin, uint64_t skip_end, bool typical_ranges);

  // Empty when `v` is not a pointer into volatile memory; else what it
  // points into.
  std::string classify(uint64_t v) const;

 private:
  struct Mapping {
    uint64_t begin, end;
    std::string name;
  };
  std::vector<Mapping> maps_;  // sorted
  uint64_t skip_begin_, skip_end_;
  bool typical_ranges_;
};

}  // namespace pm

#endif  // LIBPM_ESCAPE_CLASSIFIER_H_
