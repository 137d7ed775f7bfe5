// Workloads that drive the key-value store through the crash harness.
#ifndef TESTS_CRASH_KV_WORKLOADS_H_
#define TESTS_CRASH_KV_WORKLOADS_H_

#include <memory>

#include "crash/crash_harness.h"

namespace pm::crash {

// Puts (values up to 2 KB, so the two 64 KiB logs wrap), removes,
// transactions, partial gleaning, epochs and checkpoints on 40 keys, checked
// against a model: every acknowledged update survives, nothing else appears.
std::unique_ptr<Workload> make_kv_workload();

}  // namespace pm::crash

#endif  // TESTS_CRASH_KV_WORKLOADS_H_
