// pm: the libpm command-line tool. Results go to stdout, diagnostics to
// stderr. Exit codes: 0 done, 1 failed, 2 usage.
#include <cstdio>

#include "pm/command.h"

int main(int argc, char** argv) {
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
    // "A subcommand is required" for `pm foo` does not say what was wrong.
    for (int i = 1; i < argc && e.get_exit_code() != 0; i++) {
      if (argv[i][0] == '-') continue;
      const auto subs = app.get_subcommands([&](CLI::App* a) { return a->check_name(argv[i]); });
      if (!subs.empty()) break;
      std::fprintf(stderr, "pm: '%s' is not a pm command; run pm --help for the list\n", argv[i]);
      return 2;
    }
    return app.exit(e) == 0 ? 0 : 2;
  }
  for (const auto& c : commands) {
    if (!c.app->parsed()) continue;
    pm::Status s = c.run();
    if (!s.ok()) {
      std::fprintf(stderr, "pm %s: %s\n", c.app->get_name().c_str(), s.to_string().c_str());
      return 1;
    }
    return 0;
  }
  return 2;
}
