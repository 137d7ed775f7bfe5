// Crash harness: runs a Workload on a container whose persistence goes
// through SimPersist, and at every persistence point builds crash images
// (what a power failure there could leave in the file) and has a checker
// process recover and verify each one:
//   - the image opens (journal replay or torn-journal detection),
//   - pm check finds the heap metadata consistent,
//   - the workload's digest of the recovered state is the last acknowledged
//     commit's, or the in-flight commit's (all or nothing),
//   - optionally, a second crash during that recovery recovers the same way.
// The checker is forked before any container is opened, so it can map each
// image at the address recorded in it. Failures print a token; running with
// PM_CRASH_REPLAY=<token> checks exactly that image again, verbosely.
//
// Process kills: run_kills() forks children that SIGKILL themselves at the
// N-th persistence point (every named kill point included) and checks the
// reopened container the same way.
#ifndef TESTS_CRASH_CRASH_HARNESS_H_
#define TESTS_CRASH_CRASH_HARNESS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "crash/sim_persist.h"
#include "pm/container.h"

namespace pm::crash {

// What a workload tells the harness about its commits.
class CommitLog {
 public:
  virtual ~CommitLog() = default;
  // Commits `c`, recording the digest of the state being committed.
  virtual Status commit(Container& c) = 0;
  // Runs `op`, an operation that is durable when it returns without a
  // commit() (a key-value store's put), after which the logical state has
  // digest `after`: a crash during it may recover either state; once it
  // returned OK, only `after`.
  virtual Status durable(uint64_t after, const std::function<Status()>& op) = 0;
};

class Workload {
 public:
  virtual ~Workload() = default;
  virtual std::string name() const = 0;
  virtual Options options() const;
  // Builds the first state in a new container (the harness commits it).
  virtual Status setup(Container& c, std::mt19937_64& rng) = 0;
  // One step: mutations, commits through `log`, aborts.
  virtual Status step(Container& c, std::mt19937_64& rng, CommitLog& log) = 0;
  // Digest of the logical state (the working view, or a recovered container).
  virtual uint64_t digest(Container& c) = 0;
};

struct HarnessOptions {
  UnitMode mode = UnitMode::kPmemLines;
  uint64_t seed = 1;
  int steps = 200;
  size_t exhaustive_limit = 64;  // enumerate every image when at most this many
  int random_images = 6;         // else: extremes plus this many random images
  int recovery_crash_every = 8;  // every N-th pending-journal image: crash in recovery too
  int max_reported_failures = 5;
};

struct Counts {
  uint64_t points = 0;  // persistence points seen
  uint64_t states = 0;  // crash images recovered and checked
  uint64_t recovery_crashes = 0;
  uint64_t kills = 0;
  uint64_t failures = 0;
  std::vector<std::string> reports;  // token: reason, for the first failures

  Counts& operator+=(const Counts& o);
};

// Simulated power failures at every persistence point of `steps` steps.
Counts run_power_failures(const std::function<std::unique_ptr<Workload>()>& make,
                          const HarnessOptions& options);

// Children killed with SIGKILL at persistence points 1, 1+stride, ... of a
// run of `steps` steps, `rounds` children in all.
Counts run_kills(const std::function<std::unique_ptr<Workload>()>& make,
                 const HarnessOptions& options, int rounds);

}  // namespace pm::crash

#endif  // TESTS_CRASH_CRASH_HARNESS_H_
