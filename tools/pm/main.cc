// pm: the libpm command-line tool. Results go to stdout, diagnostics to
// stderr. Exit codes: 0 done, 1 failed, 2 usage.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>

#include "libpm/c_guard.h"
#include "pm/command.h"

namespace {

// With --json a failure is a JSON object on stdout too, so that a script
// reading stdout never gets a table or nothing: {"error": {"code", "message"}}
// (a listing that fails part way closes the array of what it listed
// instead, and says why on stderr).
void json_error(const std::string& code, const std::string& message) {
  const nlohmann::json j = {{"error", {{"code", code}, {"message", message}}}};
  std::printf("%s\n", j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
}

// A standard descriptor the caller closed (`pm kv get s k >&-`) is given
// /dev/null the wrong way round, so that it stays taken (else the store
// opened next gets its number, and printing writes into the store) and
// using it still fails, as it would have: output then ends in an error.
void hold_closed_stdio() {
  for (int fd = 0; fd < 3; fd++) {
    if (::fcntl(fd, F_GETFD) >= 0 || errno != EBADF) continue;
    const int null = ::open("/dev/null", fd == 0 ? O_WRONLY : O_RDONLY);
    if (null >= 0 && null != fd) {
      (void)::dup2(null, fd);
      ::close(null);
    }
  }
}

// Output that could not all be written (a full disk, a closed stdout)
// fails the command: a script must not take a cut table for a result. (A
// command that failed has said why already.)
int finish_output(const std::string& command, int rc) {
  errno = 0;
  if ((std::fflush(stdout) == 0 && !std::ferror(stdout)) || rc != 0) return rc;
  const int err = errno;
  std::fprintf(stderr, "pm %s: write stdout: %s\n", command.c_str(),
               err != 0 ? std::strerror(err) : "an earlier write failed");
  return 1;
}

bool wants_json(int argc, char** argv) {
  for (int i = 1; i < argc; i++) {
    if (std::strcmp(argv[i], "--json") == 0) return true;
  }
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  // Past a file-size limit (ulimit -f) a write fails with EFBIG, reported
  // as an error, instead of killing the process half way.
  std::signal(SIGXFSZ, SIG_IGN);
  hold_closed_stdio();
  CLI::App app{"pm: persistent containers and the tools around them"};
  app.require_subcommand(1);
  app.fallthrough();  // global flags may follow the subcommand
  app.set_version_flag("--version", "pm (libpm) " PM_VERSION);
  pm::cli::Globals g;
  app.add_flag("--json", g.json, "print machine-readable JSON instead of tables");
  std::vector<pm::cli::Command> commands;
  pm::cli::add_container_commands(app, g, &commands);
  pm::cli::add_bench_commands(app, g, &commands);
  pm::cli::add_kv_commands(app, g, &commands);
  pm::cli::add_mount_commands(app, g, &commands);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // "A subcommand is required" for `pm foo` or `pm kv foo` does not say
    // what was wrong: the first word that names no subcommand where one is
    // expected does.
    CLI::App* at = &app;
    std::string path = "pm";
    for (int i = 1; i < argc && e.get_exit_code() != 0; i++) {
      if (argv[i][0] == '-') continue;
      if (at->get_subcommands({}).empty()) break;  // a command's own arguments
      const auto subs = at->get_subcommands([&](CLI::App* a) { return a->check_name(argv[i]); });
      if (!subs.empty()) {
        at = subs.front();
        path += " " + at->get_name();
        continue;
      }
      const std::string what = "'" + std::string(argv[i]) + "' is not a " + path + " command";
      std::fprintf(stderr, "pm: %s; run %s --help for the list\n", what.c_str(), path.c_str());
      if (wants_json(argc, argv)) json_error("usage", what);
      return 2;
    }
    if (e.get_exit_code() != 0 && wants_json(argc, argv)) json_error("usage", e.what());
    return app.exit(e) == 0 ? 0 : 2;
  }
  for (const auto& c : commands) {
    if (!c.app->parsed()) continue;
    // Out of memory (a load of a large file, a listing of an unindexed
    // store) is an error exit like any other, not a core dump.
    pm::Status s = pm::status_of([&] { return c.run(); });
    if (!s.ok()) {
      std::fprintf(stderr, "pm %s: %s\n", c.app->get_name().c_str(), s.to_string().c_str());
      if (g.json && !pm::cli::g_json_report_printed) json_error(s.to_string().substr(0, s.to_string().find(':')), s.message());
      return finish_output(c.app->get_name(), 1);
    }
    return finish_output(c.app->get_name(), 0);
  }
  return 2;
}
