// Command: one `pm` subcommand. Each cmd_*.cc registers its commands; main.cc
// parses, runs the chosen one and maps its Status to an exit code.
#ifndef TOOLS_PM_COMMAND_H_
#define TOOLS_PM_COMMAND_H_

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "pm/status.h"

namespace pm::cli {

struct Globals {
  bool json = false;
};

// Set by a command that printed its JSON report before failing (pm check,
// pm kv salvage): main then adds no {"error": ...} document to stdout.
inline bool g_json_report_printed = false;

struct Command {
  CLI::App* app;
  std::function<Status()> run;
};

// A size option ("64MiB", "4096"): units as CLI::AsSizeValue; a negative
// size is a usage error (exit 2) rather than a wrapped huge number.
inline CLI::Option* add_size_option(CLI::App* app, const std::string& name, uint64_t& into,
                                    const std::string& help) {
  return app->add_option(name, into, help)
      ->transform(CLI::AsSizeValue(false))
      ->transform(CLI::Validator(
          [](std::string& v) {
            return v.find_first_not_of(" \t") != std::string::npos &&
                           v[v.find_first_not_of(" \t")] == '-'
                       ? "'" + v + "' is negative: sizes are 0 or more"
                       : std::string();
          },
          "SIZE"));
}

// Heap sizes a container takes (pm::Options): initial from 1 MiB, the
// largest a whole number of GiB up to 1 TiB. Checked here so that a bad
// value is a usage error (exit 2), named by its option.
inline const CLI::Validator kHeapSize = CLI::Range(uint64_t{1} << 20, uint64_t{1} << 40);
inline const CLI::Validator kMaxHeapSize(
    [](std::string& v) {
      const uint64_t n = std::strtoull(v.c_str(), nullptr, 10);
      return n == 0 || n % (uint64_t{1} << 30) != 0 || n > (uint64_t{1} << 40)
                 ? "'" + v + "' bytes is not a multiple of 1GiB from 1GiB to 1TiB"
                 : std::string();
    },
    "SIZE");

// A file or directory argument: an empty one is a usage error (exit 2),
// not a file named "" (or the current directory, once made absolute).
inline const CLI::Validator kPath(
    [](std::string& v) { return v.empty() ? std::string("the path is empty") : std::string(); },
    "PATH");

// A number of seconds: NaN passes every range (its comparisons are all
// false) and would wait for ever, so it is refused first, and so is
// infinity.
inline const CLI::Validator kFinite(
    [](std::string& v) {
      char* end = nullptr;
      const double d = std::strtod(v.c_str(), &end);
      return std::isfinite(d) ? std::string() : "'" + v + "' is not a finite number";
    },
    "FINITE");

// A count (a limit): decimal digits that fit 64 bits. Parsed as it comes,
// " -1" would wrap to 2^64 - 1 and an overflow would clamp to it: both
// would mean "all".
inline const CLI::Validator kCount(
    [](std::string& v) {
      if (v.empty() || v.find_first_not_of("0123456789") != std::string::npos) {
        return "'" + v + "' is not a count (decimal digits: 0 or more)";
      }
      errno = 0;
      (void)std::strtoull(v.c_str(), nullptr, 10);
      return errno == ERANGE ? "'" + v + "' is too large (at most 18446744073709551615)"
                             : std::string();
    },
    "COUNT");

// A benchmark's working directory: not empty ('' used to run in the current
// directory under a blank name).
inline const CLI::Validator kBenchDir(
    [](std::string& v) { return v.empty() ? std::string("the directory is empty ('')") : ""; },
    "DIR");

// Seconds a benchmark's cell or budget runs (CLI::PositiveNumber's message
// prints the largest double in full).
inline const CLI::Validator kBenchSeconds = kFinite & CLI::Range(0.001, 86400.0);

// Commands that only read open a file read-only when this user may not
// write it (a shared lock; pm::Options::read_only), and writably otherwise,
// so that they also finish a recovery the file may need.
inline bool open_read_only(const std::string& path) {
  return ::access(path.c_str(), W_OK) != 0 && errno != ENOENT;
}

// JSON text for stdout. Strings are UTF-8 in JSON: bytes of a path, key or
// name that are not come out as U+FFFD (the default dump() throws).
inline std::string json_text(const nlohmann::json& j) {
  return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
}

// Registration functions, one per command family.
void add_container_commands(CLI::App& root, const Globals& g, std::vector<Command>* out);
void add_bench_commands(CLI::App& root, const Globals& g, std::vector<Command>* out);
void add_kv_commands(CLI::App& root, const Globals& g, std::vector<Command>* out);
void add_mount_commands(CLI::App& root, const Globals& g, std::vector<Command>* out);

}  // namespace pm::cli

#endif  // TOOLS_PM_COMMAND_H_
