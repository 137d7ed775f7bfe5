// EngineProcess: one engine of `pm bench kv` in a child process of its own.
//
// Engines sharing one process change each other's speed: with the DRAM
// engine and the kvstore in one process, the DRAM engine's throughput moved
// by 20% when only the kvstore's heap growth step changed (3.42 vs 4.20 M
// gets/s, while alone it measured the same with both), which moved every
// "vs volatile" ratio. Memory placement is shared by all engines of a
// process; a process of its own gives each engine the machine as it would
// have it alone. The parent keeps coordinating, so cells stay interleaved.
//
// The child is forked before the parent starts any engine (no engine's
// threads exist at the fork), makes its engine, and serves requests over
// a pipe until the parent closes it.
#ifndef TOOLS_BENCH_KV_KV_ENGINE_PROCESS_H_
#define TOOLS_BENCH_KV_KV_ENGINE_PROCESS_H_

#include <sys/types.h>

#include <functional>
#include <memory>
#include <string>

#include "bench/kv/kv_engine.h"
#include "bench/kv/kv_runner.h"
#include "bench/kv/kv_workload.h"
#include "pm/status.h"

namespace pm::bench {

class EngineProcess {
 public:
  using Make = std::function<Result<std::unique_ptr<KvEngine>>()>;

  // Forks a child that runs make() and reports how it went: an error of
  // make() (kNotSupported for an engine not built) comes back here.
  static Result<std::unique_ptr<EngineProcess>> start(const Make& make, const KeyStreams& streams);
  // Closes the pipe and waits for the child.
  ~EngineProcess();
  EngineProcess(const EngineProcess&) = delete;
  EngineProcess& operator=(const EngineProcess&) = delete;

  const std::string& prefill_method() const { return prefill_method_; }
  Status prefill(uint64_t keys);
  Result<CellResult> run_cell(const CellSpec& spec, double seconds);
  Status settle();

 private:
  struct Request;
  struct Reply;
  EngineProcess(pid_t pid, int to, int from) : pid_(pid), to_(to), from_(from) {}
  Result<Reply> call(const Request& q);

  pid_t pid_;
  int to_, from_;
  std::string prefill_method_;
};

}  // namespace pm::bench

#endif  // TOOLS_BENCH_KV_KV_ENGINE_PROCESS_H_
