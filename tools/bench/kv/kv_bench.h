// `pm bench kv`: the kvstore against its own parts and the baselines, after
// Bullet's evaluation (Figure 5): volatile (the DRAM frontend alone), phash
// (the persistent backend alone, a commit per put), kvstore (the full
// kv::Store), pmemobj (a libpmemobj hash map, a transaction per put) and,
// on an ordinary file system, rocksdb (sync writes). Prints the environment,
// then tables with ratios to volatile and kvstore/pmemobj, kvstore recovery
// and memory; or, with json, one JSON document.
#ifndef TOOLS_BENCH_KV_KV_BENCH_H_
#define TOOLS_BENCH_KV_KV_BENCH_H_

#include "bench/kv/kv_config.h"
#include "pm/status.h"

namespace pm::bench {

// Results go to stdout, progress to stderr (only on a terminal). Every file
// created is removed, and the directory too if this run created it.
// Errors: the first engine or file system error (the run stops there);
// kCorruption when a get returns a wrong value or misses a loaded key.
Status run_kv_bench(const KvConfig& cfg, bool json);

}  // namespace pm::bench

#endif  // TOOLS_BENCH_KV_KV_BENCH_H_
