// Crash harness: runs a Workload on a container whose persistence goes
// through SimPersist (sim_persist.h: the exact persistence model), and at
// every persistence point builds crash images (what a power failure there
// could leave in the file) and has a checker process recover and verify
// each one:
//   - the image opens (journal replay or torn-journal detection),
//   - pm check finds the heap metadata consistent,
//   - the workload's digest of the recovered state is one the workload
//     allows at that moment: the last acknowledged state, or one with some
//     of the operations in flight (all or nothing each),
//   - optionally, a second crash during that recovery recovers the same way.
// The checker is forked before any container is opened, so it can map each
// image at the address recorded in it. Failures print a token; running with
// PM_CRASH_REPLAY=<token> checks exactly that image again, verbosely.
//
// Modes:
//   run_power_failures  one session, crash images at every persistence point.
//   run_session_chains  several sessions in a row, each a child process that
//                       recovers what the previous one left (a power failure
//                       at a persistence point, a kill there after which what
//                       was never written back may be lost as well, or a
//                       clean close), checks it, works on and ends; every
//                       persistence point of every session is explored too.
//   run_kills           children SIGKILLed at persistence points; the parent
//                       checks the reopened file.
//   run_faults          the n-th sync fails (EIO; ENOSPC for growth), for n
//                       over the syncs of a run: every failure must come back
//                       as a Status (no signal), lose no acknowledged update,
//                       and leave a file that reopens and accepts writes.
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

// At most this many states are allowed at once (a workload with operations
// in flight allows every subset of them).
inline constexpr size_t kMaxAllowed = 512;

// What a workload tells the harness about the states a crash may recover.
class CommitLog {
 public:
  virtual ~CommitLog() = default;
  // Commits `c`, recording the digest of the state being committed.
  virtual Status commit(Container& c) = 0;
  // Runs `op`, an operation that is durable when it returns without a
  // commit() (a key-value store's put), after which the logical state has
  // digest `after`: a crash during it may recover either state; once it
  // returned OK, only `after`. After a failed op both stay possible.
  virtual Status durable(uint64_t after, const std::function<Status()>& op) = 0;
  // Replaces what commit() and durable() track: from now on a crash may
  // recover exactly these states (for workloads that model several
  // operations in flight; at most kMaxAllowed).
  virtual void expect(const std::vector<uint64_t>& digests) = 0;
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
  // A new session on a recovered container (session chains): reopens what
  // runs on it and takes the recovered state as its model. The harness then
  // checks digest(c) against what the previous session allowed.
  virtual Status resume(Container& c, CommitLog& log);
  // Closes what runs on the container (a clean close) before the harness
  // closes the container.
  virtual Status close(CommitLog& log);
  // Whether the model stays right when steps go on after one failed (fault
  // injection); if not, the run stops at the first failure.
  virtual bool continues_after_failure() const { return true; }
  // A recovered container must accept writes: a small change, committed.
  virtual Status write_probe(Container& c);
  // digest() only reads the container (no store or database on it): the
  // harness then also takes it from a read-only open of each image, before
  // recovery, which must see what recovery then makes.
  virtual bool digest_only_reads() const { return false; }
  // Concurrent schedules run so far (0 for sequential workloads).
  virtual uint64_t schedules() const { return 0; }
};

struct HarnessOptions {
  UnitMode mode = UnitMode::kPmemLines;
  uint64_t seed = 1;
  int steps = 200;
  size_t exhaustive_limit = 64;  // enumerate every image when at most this many
  int random_images = 6;         // else: extremes plus this many random images
  int recovery_crash_every = 8;  // every N-th image: crash in recovery too
  int max_reported_failures = 5;
  bool stop_at_first_failure = false;  // self-tests: one failure is the answer
};

struct Counts {
  uint64_t points = 0;  // persistence points seen
  uint64_t states = 0;  // crash images recovered and checked
  uint64_t recovery_crashes = 0;
  uint64_t kills = 0;
  uint64_t sessions = 0;   // sessions run by chains
  uint64_t faults = 0;     // injected sync failures
  uint64_t schedules = 0;  // concurrent schedules
  uint64_t failures = 0;
  std::vector<std::string> reports;  // token: reason, for the first failures

  Counts& operator+=(const Counts& o);
};

// Simulated power failures at every persistence point of `steps` steps.
Counts run_power_failures(const std::function<std::unique_ptr<Workload>()>& make,
                          const HarnessOptions& options);

// One run of `steps` steps with no crash and no fault: a failure when a
// step fails. Power-failure runs check the same in their live session,
// after exploring every point before the step; this gets there at once
// (self-tests of checks a workload makes late in a run).
Counts run_once(const std::function<std::unique_ptr<Workload>()>& make,
                const HarnessOptions& options);

// `chains` chains of `sessions` sessions of about `options.steps` steps each
// (chain i uses seed options.seed + i).
Counts run_session_chains(const std::function<std::unique_ptr<Workload>()>& make,
                          const HarnessOptions& options, int chains, int sessions);

// Children killed with SIGKILL at persistence points 1, 1+stride, ... of a
// run of `steps` steps, `rounds` children in all.
Counts run_kills(const std::function<std::unique_ptr<Workload>()>& make,
                 const HarnessOptions& options, int rounds);

// Runs of `steps` steps in which one sync fails: every sync of the run when
// there are at most `rounds`, else `rounds` spread over them.
Counts run_faults(const std::function<std::unique_ptr<Workload>()>& make,
                  const HarnessOptions& options, int rounds);

}  // namespace pm::crash

#endif  // TESTS_CRASH_CRASH_HARNESS_H_
