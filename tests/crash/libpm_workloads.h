// Workloads that drive libpm through the crash harness.
#ifndef TESTS_CRASH_LIBPM_WORKLOADS_H_
#define TESTS_CRASH_LIBPM_WORKLOADS_H_

#include <memory>

#include "crash/crash_harness.h"

namespace pm::crash {

// Random word and line updates in an array, commits and aborts.
std::unique_ptr<Workload> make_mutation_workload();
// The same on a file that may not grow, with runs up to the journal's room
// past the heap: off pmem, commits whose body fits neither below nor above
// the deferred body (ContainerImpl::place_body's full-disk fallback).
std::unique_ptr<Workload> make_mutation_full_workload();
// A list of blocks of many sizes (slab classes, page runs, blocks that make
// the heap grow), allocated, rewritten and freed; commits and aborts.
std::unique_ptr<Workload> make_allocator_workload();
// Blocks written and freed in one commit, their space used again by the
// next: the fresh bytes a commit writes home without its journal.
std::unique_ptr<Workload> make_reuse_workload();

}  // namespace pm::crash

#endif  // TESTS_CRASH_LIBPM_WORKLOADS_H_
