#include "bench/kv/kv_engine.h"

#include <chrono>

#include "bench/common/workload.h"

namespace pm::bench {

Status KvEngine::prefill(uint64_t n) {
  unsigned char key[kKeyBytes], value[kValueBytes];
  for (uint64_t i = 0; i < n; i++) {
    make_key(i, key);
    make_value(i, value);
    PM_TRY(put(bytes_view(key, kKeyBytes), bytes_view(value, kValueBytes)));
  }
  return Status();
}

void busy_wait_ns(uint32_t ns) {
  if (ns == 0) return;
  const auto until = std::chrono::steady_clock::now() + std::chrono::nanoseconds(ns);
  while (std::chrono::steady_clock::now() < until) {
  }
}

}  // namespace pm::bench
