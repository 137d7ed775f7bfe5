// Memory usage of this process as the kernel reports it: the whole process
// (/proc/self/status) and one address range (/proc/self/smaps), which is how
// `pm bench` attributes DRAM to one container's working view.
#ifndef TOOLS_BENCH_COMMON_MEMORY_USAGE_H_
#define TOOLS_BENCH_COMMON_MEMORY_USAGE_H_

#include <cstdint>

#include "pm/status.h"

namespace pm::bench {

// RssAnon of the process, in bytes. kIOError when /proc is unreadable.
Result<uint64_t> process_rss_anon();

struct RangeMemory {
  uint64_t rss = 0;        // resident bytes mapped in the range (file pages too)
  uint64_t anonymous = 0;  // private copies (copy-on-write pages): DRAM the view holds
};

// Sums the smaps entries of the mappings that overlap [begin, end).
// kIOError when /proc/self/smaps is unreadable.
Result<RangeMemory> range_memory(uint64_t begin, uint64_t end);

}  // namespace pm::bench

#endif  // TOOLS_BENCH_COMMON_MEMORY_USAGE_H_
