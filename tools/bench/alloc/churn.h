// Churn: the fragmentation workload of `pm bench alloc`, after Nibble
// (Merritt et al., VLDB 2018): fill an allocator with objects of one size up
// to a live-byte target, then keep replacing random live objects with objects
// of another size while live bytes stay at the target. The six patterns are
// Nibble's.
#ifndef TOOLS_BENCH_ALLOC_CHURN_H_
#define TOOLS_BENCH_ALLOC_CHURN_H_

#include <cstdint>
#include <string>
#include <vector>

#include "bench/alloc/alloc_engine.h"
#include "bench/common/workload.h"
#include "pm/status.h"

namespace pm::bench {

struct Pattern {
  std::string name;  // "P1"
  uint32_t from;     // bytes of the objects the fill allocates
  uint32_t to;       // bytes of the objects that replace them
};

// P1 60->70 B, P2 1000->1024 B, P3 1000->1030 B, P4 1->10 KiB,
// P5 10->100 KiB, P6 500->600 KiB.
const std::vector<Pattern>& nibble_patterns();

struct ChurnOutcome {
  uint64_t live_bytes = 0;      // requested bytes live at the end
  uint64_t objects = 0;         // objects live at the end
  uint64_t replaced_bytes = 0;  // bytes allocated after the fill
  uint64_t old_objects = 0;     // objects of the first size still live
  double seconds = 0;           // fill and replacement
  Usage usage;                  // measured at the end, objects live
};

// Thread safety: one thread.
class Churn {
 public:
  // Sizes and touches the table of live objects up front, so that a process
  // measuring its own memory growth can take its baseline after this.
  // REQUIRES: live_bytes >= both sizes of the pattern.
  Churn(const Pattern& p, uint64_t live_bytes, double churn_factor, uint64_t seed);

  // Fills, replaces until churn_factor * live_bytes bytes were allocated,
  // then measures the engine's usage. Each new object is written (a byte per
  // 4 KiB page), as a program would, so that resident memory counts it. The
  // objects stay allocated: destroy the engine afterwards.
  // Errors: the engine's.
  Result<ChurnOutcome> run(AllocEngine& engine);

 private:
  struct Object {
    uint64_t handle;
    uint32_t size;
  };

  Status add(AllocEngine& engine, uint32_t size);
  Status remove_random(AllocEngine& engine);

  Pattern pattern_;
  uint64_t target_;
  uint64_t replace_bytes_;
  Rng rng_;
  std::vector<Object> objects_;
  uint64_t count_ = 0;
  uint64_t live_ = 0;
};

}  // namespace pm::bench

#endif  // TOOLS_BENCH_ALLOC_CHURN_H_
