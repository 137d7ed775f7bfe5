// Command: one `pm` subcommand. Each cmd_*.cc registers its commands; main.cc
// parses, runs the chosen one and maps its Status to an exit code.
#ifndef TOOLS_PM_COMMAND_H_
#define TOOLS_PM_COMMAND_H_

#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <vector>

#include "pm/status.h"

namespace pm::cli {

struct Globals {
  bool json = false;
};

struct Command {
  CLI::App* app;
  std::function<Status()> run;
};

// Registration functions, one per command family.
void add_container_commands(CLI::App& root, const Globals& g, std::vector<Command>* out);
void add_bench_commands(CLI::App& root, const Globals& g, std::vector<Command>* out);
void add_kv_commands(CLI::App& root, const Globals& g, std::vector<Command>* out);
void add_mount_commands(CLI::App& root, const Globals& g, std::vector<Command>* out);

}  // namespace pm::cli

#endif  // TOOLS_PM_COMMAND_H_
