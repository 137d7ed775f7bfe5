// pm create | info | check: container administration.
#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>
#include <optional>
#include <nlohmann/json.hpp>

#include "kv/check.h"
#include "pm/command.h"
#include "pm/container.h"

namespace pm::cli {

namespace {

// For commands that only read (info, check): see open_read_only().
Result<std::unique_ptr<Container>> open_for_reading(const std::string& path) {
  Options o;
  o.read_only = open_read_only(path);
  Result<std::unique_ptr<Container>> c = Container::open(path, o);
  if (c.ok() || !c.status().is_busy() || o.read_only) return c;
  // Busy: another process may hold it for reading only (pm kv get, a
  // read-only open), which a read-only open shares, as pm kv get does.
  o.read_only = true;
  Result<std::unique_ptr<Container>> shared = Container::open(path, o);
  return shared.ok() || !shared.status().is_busy() ? std::move(shared) : std::move(c);
}

std::string mib(uint64_t b) { return fmt::format("{:.1f} MiB", double(b) / (1 << 20)); }

// ContainerInfo::dirty_pages is left out: it counts this process's
// uncommitted writes, which for a command that only opened the file are
// the open's own (its generation, committed with the next commit), so it
// read 1 for every file.
nlohmann::json info_json(const ContainerInfo& i) {
  return {{"path", i.path},
          {"file_bytes", i.file_bytes},
          {"heap_bytes", i.heap_bytes},
          {"max_bytes", i.max_bytes},
          {"used_bytes", i.used_bytes},
          {"free_bytes", i.free_bytes},
          {"blocks", i.blocks},
          {"base_address", i.base_address},
          {"commits", i.commits},
          {"is_pmem", i.is_pmem},
          {"read_only", i.read_only},
          {"tracker", i.tracker},
          {"layout", i.layout},
          {"journal", journal_state_name(i.journal)},
          {"superblock_damage", i.superblock_damage}};
}

void print_info(const ContainerInfo& i) {
  auto row = [](const char* k, const std::string& v) { fmt::print("{:<14}{}\n", k, v); };
  row("path", i.path);
  row("file", mib(i.file_bytes));
  row("heap", fmt::format("{} of at most {}", mib(i.heap_bytes), mib(i.max_bytes)));
  row("used", fmt::format("{} in {} blocks", mib(i.used_bytes), i.blocks));
  row("free", mib(i.free_bytes));
  row("base address", fmt::format("{:#x}", i.base_address));
  row("pmem", i.is_pmem ? "yes (cache flushes)" : "no (msync)");
  row("tracker", i.tracker);
  row("journal", fmt::format("{} (last commit {})", journal_state_name(i.journal), i.commits));
  if (i.read_only) row("opened", "read-only (no write access)");
  row("layout", i.layout.empty() ? "-" : i.layout);
  for (const std::string& d : i.superblock_damage) row("damage", d);
}

nlohmann::json escaping_json(const std::vector<EscapingPointer>& es) {
  nlohmann::json a = nlohmann::json::array();
  for (const EscapingPointer& e : es) {
    a.push_back(
        {{"object", e.object}, {"offset", e.offset}, {"target", e.target}, {"where", e.where}});
  }
  return a;
}

// The layout name of a key-value store (kvstore/store.cc).
constexpr const char* kStoreLayout = Options::kKvStoreLayout;

void print_check(const CheckReport& r, const ContainerInfo& i, const kv::StoreCheck* store,
                 bool json) {
  const bool ok = r.superblock.empty() && r.problems.empty() && r.escaping.empty() &&
                  (store == nullptr || store->problems.empty());
  if (json) {
    nlohmann::json j{{"path", i.path},
                     {"ok", ok},
                     {"journal", journal_state_name(i.journal)},
                     {"blocks", r.blocks},
                     {"reachable_blocks", r.reachable_blocks},
                     {"used_bytes", r.used_bytes},
                     {"superblock", r.superblock},
                     {"problems", r.problems},
                     {"escaping", escaping_json(r.escaping)}};
    if (store != nullptr) {
      j["store"] = {{"keys", store->keys},       {"ghosts", store->ghosts},
                    {"buckets", store->buckets}, {"log_records", store->log_records},
                    {"problems", store->problems}, {"notes", store->notes}};
    }
    fmt::print("{}\n", j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace));
    return;
  }
  if (r.superblock.empty()) fmt::print("superblock    ok\n");
  for (const std::string& p : r.superblock) fmt::print("superblock    {}\n", p);
  fmt::print("journal       {}\nheap          {} blocks ({} reachable), {}\n",
             journal_state_name(i.journal), r.blocks, r.reachable_blocks, mib(r.used_bytes));
  for (const std::string& p : r.problems) fmt::print("problem       {}\n", p);
  for (const EscapingPointer& e : r.escaping) {
    fmt::print("escaping      object {:#x} + {} -> {:#x} ({})\n", e.object, e.offset, e.target,
               e.where);
  }
  if (store != nullptr) {
    fmt::print("store         {} keys, {} ghosts in {} buckets; {} log records to replay\n",
               store->keys, store->ghosts, store->buckets, store->log_records);
    for (const std::string& p : store->problems) fmt::print("problem       {}\n", p);
    for (const std::string& n : store->notes) fmt::print("note          {}\n", n);
    if (!store->problems.empty()) {
      fmt::print("repair        pm kv salvage {} NEW-STORE  (copies every readable key)\n", i.path);
    }
  }
  fmt::print("{}\n", ok ? "consistent" : "INCONSISTENT");
}

Status run_check(const std::string& path, bool json) {
  Result<std::unique_ptr<Container>> c = open_for_reading(path);
  if (!c.ok()) {
    // A file too damaged to open is a check's finding; a busy, missing or
    // unreadable one is an error like any other ({"error": ...}).
    if (json && c.status().code() == Code::kCorruption) {
      fmt::print("{}\n", json_text({{"path", path},
                                    {"ok", false},
                                    {"problems", {c.status().message()}}}));
      g_json_report_printed = true;
    }
    return c.status();
  }
  const bool tty = isatty(2);
  if (tty) std::fprintf(stderr, "checking %s ...", path.c_str());
  CheckReport r = (*c)->check(/*foreign_writer=*/true);  // written by another process
  const ContainerInfo info = (*c)->info();
  // A store is checked too, unless its heap is damaged (its walk trusts it).
  std::optional<kv::StoreCheck> store;
  if (info.layout == kStoreLayout && r.problems.empty()) {
    Result<kv::StoreCheck> s = kv::check_store(c->get());
    if (s.ok()) {
      store = std::move(*s);
    } else if (s.status().code() == Code::kInvalidArgument ||
               s.status().code() == Code::kNotSupported) {
      // The container says it holds a store: a root that is not one (or of
      // a format no build wrote) is damage to report, not a usage error.
      store.emplace();
      store->problems.push_back("the store's root: " + s.status().message());
    } else {
      return s.status();
    }
  }
  if (tty) std::fprintf(stderr, "\r\033[K");
  print_check(r, info, store ? &*store : nullptr, json);
  g_json_report_printed = json;
  if (!r.problems.empty()) {
    return Status::corruption(
        fmt::format("{}: {} problem(s) in the heap metadata", path, r.problems.size()));
  }
  if (store && !store->problems.empty()) {
    return Status::corruption(
        fmt::format("{}: {} problem(s) in the store", path, store->problems.size()));
  }
  if (!r.superblock.empty()) {
    return Status::corruption(path + ": the superblock or its copy is damaged (the other one "
                                     "was sound; a writable open rewrites it)");
  }
  if (!r.escaping.empty()) {
    return Status::invalid_argument(fmt::format(
        "{} pointer(s) from persistent objects into volatile memory", r.escaping.size()));
  }
  return Status();
}

void print_collect(const CollectReport& r, bool dry_run, bool json) {
  if (json) {
    nlohmann::json by_size = nlohmann::json::array();
    for (auto [size, n] : r.freed_by_size)
      by_size.push_back({{"up_to_bytes", size}, {"blocks", n}});
    fmt::print("{}\n", json_text({{"dry_run", dry_run},
                                  {"live_blocks", r.live_blocks},
                                  {"live_bytes", r.live_bytes},
                                  {"unreachable_blocks", r.freed_blocks},
                                  {"unreachable_bytes", r.freed_bytes},
                                  {"unreachable_by_size", by_size}}));
    return;
  }
  fmt::print("live          {} blocks, {}\n", r.live_blocks, mib(r.live_bytes));
  fmt::print("{:<14}{} blocks, {}\n", dry_run ? "unreachable" : "freed", r.freed_blocks,
             mib(r.freed_bytes));
  if (r.freed_by_size.empty()) return;
  fmt::print("\n  {:>12}  {:>10}\n", "size up to", "blocks");
  for (auto [size, n] : r.freed_by_size) fmt::print("  {:>12}  {:>10}\n", size, n);
}

Status run_gc(const std::string& path, bool dry_run, bool json) {
  // A dry run changes nothing: it needs no write access.
  Result<std::unique_ptr<Container>> c = dry_run ? open_for_reading(path) : Container::open(path);
  if (!c.ok()) return c.status();
  // (collect() refuses a key-value store, which frees its own blocks.)
  const bool tty = isatty(2);
  if (tty) std::fprintf(stderr, "collecting %s ...", path.c_str());
  Result<CollectReport> r = (*c)->collect(dry_run);
  if (tty) std::fprintf(stderr, "\r\033[K");
  if (!r.ok()) return r.status().with_context("collect " + path);
  if (!dry_run) PM_TRY((*c)->commit().with_context("commit " + path));
  print_collect(*r, dry_run, json);
  return Status();
}

}  // namespace

void add_container_commands(CLI::App& root, const Globals& g, std::vector<Command>* out) {
  struct CreateArgs {
    std::string path, layout;
    uint64_t size = 64ull << 20, max_size = 64ull << 30;
  };
  auto ca = std::make_shared<CreateArgs>();
  CLI::App* create = root.add_subcommand("create", "create an empty container file");
  create->add_option("path", ca->path, "container file")->required()->check(kPath);
  add_size_option(create, "--size,--heap", ca->size, "initial heap size (e.g. 64MiB)")
      ->check(kHeapSize);
  add_size_option(create, "--max-size", ca->max_size,
                  "largest size it may grow to (multiple of 1GiB)")
      ->check(kMaxHeapSize);
  create->add_option("--layout", ca->layout, "layout name checked by programs at open");
  out->push_back({create, [ca, &g]() -> Status {
                    Options o;
                    o.initial_size = ca->size;
                    o.max_size = ca->max_size;
                    o.layout = ca->layout;
                    Result<std::unique_ptr<Container>> c = Container::create(ca->path, o);
                    if (!c.ok()) return c.status();
                    PM_TRY((*c)->commit());
                    // Closed, then read as `pm info` reads it: a live session's last
                    // commit shows "pending" until its write-back (journal.h).
                    c->reset();
                    c = open_for_reading(ca->path);
                    if (!c.ok()) return c.status();
                    ContainerInfo i = (*c)->info();
                    if (g.json) {
                      fmt::print("{}\n", json_text(info_json(i)));
                    } else {
                      fmt::print("created {} ({} heap, base {:#x})\n", i.path, mib(i.heap_bytes),
                                 i.base_address);
                    }
                    return Status();
                  }});

  auto info_path = std::make_shared<std::string>();
  CLI::App* info = root.add_subcommand("info", "show size, use, tracker and journal state");
  info->add_option("path", *info_path, "container file")->required()->check(kPath);
  out->push_back({info, [info_path, &g]() -> Status {
                    Result<std::unique_ptr<Container>> c = open_for_reading(*info_path);
                    if (!c.ok()) return c.status();
                    ContainerInfo i = (*c)->info();
                    for (const std::string& d : i.superblock_damage) {
                      fmt::print(stderr, "pm: warning: {}: {}\n", i.path, d);
                    }
                    if (g.json) {
                      fmt::print("{}\n", json_text(info_json(i)));
                    } else {
                      print_info(i);
                    }
                    return Status();
                  }});

  auto check_path = std::make_shared<std::string>();
  CLI::App* check = root.add_subcommand(
      "check",
      "verify superblock, journal, heap metadata and pointers out of the container "
      "(replays a pending commit)");
  check->add_option("path", *check_path, "container file")->required()->check(kPath);
  out->push_back({check, [check_path, &g] { return run_check(*check_path, g.json); }});

  struct GcArgs {
    std::string path;
    bool dry_run = false;
  };
  auto ga = std::make_shared<GcArgs>();
  CLI::App* gc =
      root.add_subcommand("gc", "free blocks not reachable from the roots, and commit (durable)");
  gc->add_option("path", ga->path, "container file")->required()->check(kPath);
  gc->add_flag("--dry-run,-n", ga->dry_run, "report what would be freed, by size; free nothing");
  out->push_back({gc, [ga, &g] { return run_gc(ga->path, ga->dry_run, g.json); }});
}

}  // namespace pm::cli
