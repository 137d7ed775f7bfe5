#include "bench/common/barrier_delay.h"

#include <dlfcn.h>
#include <libpmem.h>

#include <atomic>
#include <chrono>

namespace pm::bench {
namespace {

std::atomic<uint32_t> g_delay_ns{0};
thread_local uint64_t t_barriers = 0;

using DrainFn = void (*)();

DrainFn resolve_drain() {
  void* f = ::dlvsym(RTLD_NEXT, "pmem_drain", "LIBPMEM_1.0");
  if (f == nullptr) f = ::dlsym(RTLD_NEXT, "pmem_drain");
  return reinterpret_cast<DrainFn>(f);
}

void delay(uint32_t ns) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::nanoseconds(ns);
  while (std::chrono::steady_clock::now() < until) {
  }
}

}  // namespace

Status set_barrier_delay_ns(uint32_t ns) {
  if (ns == 0) {
    g_delay_ns.store(0, std::memory_order_relaxed);
    return Status();
  }
  alignas(64) static char probe[64];
  const uint64_t before = t_barriers;
  pmem_persist(probe, sizeof probe);
  if (t_barriers == before) {
    return Status::not_supported(
        "--emulate-persist-ns: this libpmem makes its barriers without calling its exported "
        "pmem_drain(), so the delay cannot be applied to libpmemobj as to our engines");
  }
  g_delay_ns.store(ns, std::memory_order_relaxed);
  return Status();
}

}  // namespace pm::bench

// libpmem's drain, interposed (see barrier_delay.h). Exported from the `pm`
// binary (tools/CMakeLists.txt) so that libpmem's and libpmemobj's calls
// bind here.
extern "C" void pmem_drain(void) {
  static const pm::bench::DrainFn real = pm::bench::resolve_drain();
  if (real != nullptr) {
    real();
  } else {
    static std::atomic<int> order;  // no libpmem found: a full barrier still orders
    order.fetch_add(0, std::memory_order_seq_cst);
  }
  pm::bench::t_barriers++;
  const uint32_t ns = pm::bench::g_delay_ns.load(std::memory_order_relaxed);
  if (ns != 0) pm::bench::delay(ns);
}
