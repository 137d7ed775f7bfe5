// Slower-PM emulation applied to every engine alike.
//
// On DRAM-emulated PM a barrier costs nanoseconds, so a design that saves
// barriers cannot show it; a delay added inside our own engines only would
// slow them and not libpmemobj. Every barrier of libpmem is a call of its
// exported pmem_drain() (pmem_persist, pmem_memcpy and the rest call it
// through the PLT), and libpmemobj and libpm reach libpmem through the
// dynamic linker. The `pm` binary defines pmem_drain() itself: every one of
// those calls comes here first, runs the real drain and then busy-waits.
#ifndef TOOLS_BENCH_COMMON_BARRIER_DELAY_H_
#define TOOLS_BENCH_COMMON_BARRIER_DELAY_H_

#include <cstdint>

#include "pm/status.h"

namespace pm::bench {

// Sets the delay per barrier (0: off). Fails, saying why, when a probe
// pmem_persist() does not come through here (a libpmem that binds its drains
// internally): the comparison would then not be fair, so none is made.
Status set_barrier_delay_ns(uint32_t ns);

}  // namespace pm::bench

#endif  // TOOLS_BENCH_COMMON_BARRIER_DELAY_H_
