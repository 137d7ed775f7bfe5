// pm create | info | check: container administration.
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "pm/command.h"
#include "pm/container.h"

namespace pm::cli {

namespace {

std::string mib(uint64_t b) { return fmt::format("{:.1f} MiB", double(b) / (1 << 20)); }

nlohmann::json info_json(const ContainerInfo& i) {
  return {{"path", i.path},
          {"file_bytes", i.file_bytes},
          {"heap_bytes", i.heap_bytes},
          {"max_bytes", i.max_bytes},
          {"used_bytes", i.used_bytes},
          {"free_bytes", i.free_bytes},
          {"blocks", i.blocks},
          {"dirty_pages", i.dirty_pages},
          {"base_address", i.base_address},
          {"commits", i.commits},
          {"is_pmem", i.is_pmem},
          {"tracker", i.tracker},
          {"layout", i.layout},
          {"journal", journal_state_name(i.journal)}};
}

void print_info(const ContainerInfo& i) {
  auto row = [](const char* k, const std::string& v) { fmt::print("{:<14}{}\n", k, v); };
  row("path", i.path);
  row("file", mib(i.file_bytes));
  row("heap", fmt::format("{} of at most {}", mib(i.heap_bytes), mib(i.max_bytes)));
  row("used", fmt::format("{} in {} blocks", mib(i.used_bytes), i.blocks));
  row("free", mib(i.free_bytes));
  row("dirty pages", std::to_string(i.dirty_pages));
  row("base address", fmt::format("{:#x}", i.base_address));
  row("pmem", i.is_pmem ? "yes (cache flushes)" : "no (msync)");
  row("tracker", i.tracker);
  row("journal", fmt::format("{} (last commit {})", journal_state_name(i.journal), i.commits));
  row("layout", i.layout.empty() ? "-" : i.layout);
}

}  // namespace

void add_container_commands(CLI::App& root, const Globals& g, std::vector<Command>* out) {
  struct CreateArgs {
    std::string path, layout;
    uint64_t size = 64ull << 20, max_size = 64ull << 30;
  };
  auto ca = std::make_shared<CreateArgs>();
  CLI::App* create = root.add_subcommand("create", "create an empty container file");
  create->add_option("path", ca->path, "container file")->required();
  create->add_option("--size", ca->size, "initial heap size (e.g. 64MiB)")
      ->transform(CLI::AsSizeValue(false));
  create->add_option("--max-size", ca->max_size, "largest size it may grow to (multiple of 1GiB)")
      ->transform(CLI::AsSizeValue(false));
  create->add_option("--layout", ca->layout, "layout name checked by programs at open");
  out->push_back({create, [ca, &g]() -> Status {
                    Options o;
                    o.initial_size = ca->size;
                    o.max_size = ca->max_size;
                    o.layout = ca->layout;
                    Result<std::unique_ptr<Container>> c = Container::create(ca->path, o);
                    if (!c.ok()) return c.status();
                    PM_TRY((*c)->commit());
                    ContainerInfo i = (*c)->info();
                    if (g.json) {
                      fmt::print("{}\n", info_json(i).dump(2));
                    } else {
                      fmt::print("created {} ({} heap, base {:#x})\n", i.path, mib(i.heap_bytes),
                                 i.base_address);
                    }
                    return Status();
                  }});

  auto info_path = std::make_shared<std::string>();
  CLI::App* info = root.add_subcommand("info", "show size, use, tracker and journal state");
  info->add_option("path", *info_path, "container file")->required();
  out->push_back({info, [info_path, &g]() -> Status {
                    Result<std::unique_ptr<Container>> c = Container::open(*info_path);
                    if (!c.ok()) return c.status();
                    ContainerInfo i = (*c)->info();
                    if (g.json) {
                      fmt::print("{}\n", info_json(i).dump(2));
                    } else {
                      print_info(i);
                    }
                    return Status();
                  }});

  auto check_path = std::make_shared<std::string>();
  CLI::App* check = root.add_subcommand(
      "check", "verify superblock, journal and heap metadata (replays a pending commit)");
  check->add_option("path", *check_path, "container file")->required();
  out->push_back({check, [check_path, &g]() -> Status {
                    Result<std::unique_ptr<Container>> c = Container::open(*check_path);
                    if (!c.ok()) {
                      if (g.json) {
                        fmt::print("{}\n", nlohmann::json{{"path", *check_path},
                                                          {"ok", false},
                                                          {"problems", {c.status().message()}}}
                                               .dump(2));
                      }
                      return c.status();
                    }
                    CheckReport r = (*c)->check();
                    ContainerInfo i = (*c)->info();
                    if (g.json) {
                      fmt::print("{}\n", nlohmann::json{{"path", i.path},
                                                        {"ok", r.problems.empty()},
                                                        {"journal", journal_state_name(i.journal)},
                                                        {"blocks", r.blocks},
                                                        {"used_bytes", r.used_bytes},
                                                        {"problems", r.problems}}
                                             .dump(2));
                    } else {
                      fmt::print(
                          "superblock    ok\njournal       {}\nheap          {} blocks, {}\n",
                          journal_state_name(i.journal), r.blocks, mib(r.used_bytes));
                      for (const std::string& p : r.problems) fmt::print("problem       {}\n", p);
                      fmt::print("{}\n", r.problems.empty() ? "consistent" : "INCONSISTENT");
                    }
                    if (!r.problems.empty()) {
                      return Status::corruption(
                          fmt::format("{} problem(s) in the heap metadata", r.problems.size()));
                    }
                    return Status();
                  }});
}

}  // namespace pm::cli
