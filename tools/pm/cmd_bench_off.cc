// pm bench, in a build configured with -DPM_BUILD_BENCH=OFF (no libpmemobj):
// the command exists and says how to get it.
#include "pm/command.h"

namespace pm::cli {

void add_bench_commands(CLI::App& root, const Globals&, std::vector<Command>* out) {
  CLI::App* bench = root.add_subcommand("bench", "run a benchmark suite (not in this build)");
  bench->require_subcommand(1);
  CLI::App* container = bench->add_subcommand("container", "not in this build");
  // Options of the real command are accepted and ignored.
  container->allow_extras()->fallthrough(false);
  out->push_back({container, []() -> Status {
                    return Status::not_supported(
                        "this pm was built with -DPM_BUILD_BENCH=OFF; reconfigure with "
                        "-DPM_BUILD_BENCH=ON (needs libpmemobj-dev)");
                  }});
}

}  // namespace pm::cli
