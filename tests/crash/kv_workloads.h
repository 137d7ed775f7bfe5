// Workloads that drive the key-value store through the crash harness.
#ifndef TESTS_CRASH_KV_WORKLOADS_H_
#define TESTS_CRASH_KV_WORKLOADS_H_

#include <functional>
#include <memory>

#include "crash/crash_harness.h"
#include "kv/store.h"

namespace pm::crash {

// Puts (values up to 2 KB, so the two 64 KiB logs wrap), removes,
// transactions, partial gleaning, epochs, checkpoints and clean reopens on
// 40 keys, one at a time, checked against a model (kv_model.h): every
// acknowledged update survives, nothing else appears.
std::unique_ptr<Workload> make_kv_workload();
// The same with Durability::kAsync, each update followed by sync(): what
// the background sync and fsync through pm mount rely on.
std::unique_ptr<Workload> make_kv_async_workload();
// Rounds of two to four actors run by the scheduler (scheduler.h): updates
// in flight while gleans, epochs, checkpoints, group syncs and log wrap run
// on other threads; a crash at every persistence point of every schedule.
std::unique_ptr<Workload> make_kv_concurrent_workload();
// The same with Durability::kAsync: an update is acknowledged by a sync()
// that began after it returned.
std::unique_ptr<Workload> make_kv_concurrent_async_workload();

// kAsync puts of one record size, synced now and then, with gleaning,
// epochs and clean reopens: across sessions, records of a later session
// line up exactly with stale ones an earlier session left beyond a torn
// record (what the session rule of recovery.h is for).
std::unique_ptr<Workload> make_kv_uniform_async_workload();

// A store file that may not grow (kSync, one update at a time): its heap
// fills with puts of 2-4 KiB, gleans block on records it has no room for and
// apply what fits behind them, epochs and puts get kNoSpace, removes go
// through; phases of removes free space and puts work again. Every
// acknowledged update must survive all of it.
std::unique_ptr<Workload> make_kv_full_workload();
// The same with values of 24-88 bytes, put and removed by the hundred in
// transactions, thousands applied and purged in one checkpoint while puts
// wait in the logs for room: the removes must make room for them.
std::unique_ptr<Workload> make_kv_full_small_workload();

// Transactions over runs of up to 40 of 1,500 ordered keys (kSync, one
// update at a time): the store's ordered index splits leaves and its root
// and drops emptied leaves and its root again, under every crash.
std::unique_ptr<Workload> make_kv_wide_workload();

// The small store the crash workloads run on: two 64 KiB logs, gleaning
// driven by the workload (deterministic), kSync.
kv::StoreOptions crash_store_options();

// Runs op on a new thread. Each thread starts on the next log, so that
// successive updates of a key land in different logs (cross-references), as
// with concurrent writers, yet the run stays deterministic.
Status on_new_thread(const std::function<Status()>& op);

}  // namespace pm::crash

#endif  // TESTS_CRASH_KV_WORKLOADS_H_
