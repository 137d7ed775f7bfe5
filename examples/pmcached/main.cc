// pmcached: a memcached server whose items live in a kvstore file, so that
// a restart (clean, kill -9 or power failure) serves every acknowledged
// item again at once. Options are memcached's where they apply.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>

#include "cache.h"
#include "server.h"

#ifndef PM_VERSION
#define PM_VERSION "0"
#endif

namespace {

// memcached's -I: bytes, or with a k or m suffix.
bool parse_size(std::string s, uint64_t* out) {
  uint64_t mult = 1;
  if (!s.empty() && (s.back() == 'k' || s.back() == 'K')) mult = 1 << 10;
  if (!s.empty() && (s.back() == 'm' || s.back() == 'M')) mult = 1 << 20;
  if (!s.empty() && (s.back() == 'g' || s.back() == 'G')) mult = 1 << 30;
  if (mult != 1) s.pop_back();
  uint64_t v;
  if (!pmcached::parse_u64(s, &v) || v > (uint64_t{1} << 40) / mult) return false;
  *out = v * mult;
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"pmcached: memcached's protocol, items kept in a crash-safe libpm store"};
  app.set_version_flag("-V,--version", std::string("pmcached ") + PM_VERSION);
  std::string store;
  pmcached::ServerOptions so;
  uint64_t memory_mb = 64;
  std::string item_max = "1m";
  int udp = 0;
  bool no_evict = false;
  app.add_option("store", store, "store file (created when missing)")->required();
  app.add_option("-p,--port", so.port, "TCP port (0: any free one, printed)")->capture_default_str()
      ->check(CLI::Range(0, 65535));
  app.add_option("-l,--listen", so.listen, "interface to listen on")->capture_default_str();
  app.add_option("-t,--threads", so.threads, "worker threads")->capture_default_str()
      ->check(CLI::Range(1, 256));
  app.add_option("-c,--conn-limit", so.max_connections, "most simultaneous connections")
      ->capture_default_str()
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 20));
  app.add_option("-m,--memory-limit", memory_mb, "item memory in MiB; beyond it items are evicted")
      ->capture_default_str()
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 24));
  app.add_option("-I,--max-item-size", item_max, "largest item value (bytes, or k/m suffix)")
      ->capture_default_str();
  app.add_option("-U,--udp-port", udp, "UDP port: only 0 (off) is supported")->capture_default_str();
  app.add_flag("-M,--disable-evictions", no_evict, "fail writes when memory is full instead");
  app.add_flag("-v,--verbose", so.verbosity, "more messages (-vv: more)");
  app.add_option("--idle-timeout", so.idle_timeout_s, "close connections idle this many seconds (0: never)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_flag("--async", so.async,
               "reply before a change is durable (faster off pmem; a crash may lose the last "
               "acknowledged changes)");
  CLI11_PARSE(app, argc, argv);
  if (udp != 0) {
    std::fprintf(stderr, "pmcached: -U %d: UDP is not supported; use -U 0\n", udp);
    return 2;
  }
  pmcached::CacheOptions co;
  uint64_t item_bytes = 0;
  if (!parse_size(item_max, &item_bytes) || item_bytes == 0 || item_bytes > (1u << 30)) {
    std::fprintf(stderr, "pmcached: -I %s: not a size from 1 byte to 1g (bytes, or k, m or g)\n",
                 item_max.c_str());
    return 2;
  }
  // As memcached: an item larger than half the memory would evict all the
  // others, and then itself (STORED, and gone).
  if (item_bytes > (memory_mb << 20) / 2) {
    std::fprintf(stderr, "pmcached: -I %s is more than half of -m %llu MiB; raise -m or lower -I\n",
                 item_max.c_str(), static_cast<unsigned long long>(memory_mb));
    return 2;
  }
  co.item_max = static_cast<uint32_t>(item_bytes);
  co.memory_limit = memory_mb << 20;
  co.evict = !no_evict;
  co.durability = so.async ? kv::Durability::kAsync : kv::Durability::kSyncOnPmem;
  const int verbosity = so.verbosity;
  co.logger = [verbosity](pm::LogLevel level, std::string_view msg) {
    if (verbosity > 0 || level >= pm::LogLevel::kWarn) {
      std::fprintf(stderr, "pmcached: %.*s\n", static_cast<int>(msg.size()), msg.data());
    }
  };
  pm::Result<std::unique_ptr<pmcached::Cache>> cache = pmcached::Cache::open(store, co);
  if (!cache.ok()) {
    std::fprintf(stderr, "pmcached: %s\n", cache.status().to_string().c_str());
    return 1;
  }
  pmcached::ServerInfo info;
  info.version = std::string("1.6.0-pmcached-") + PM_VERSION;
  info.started = (*cache)->now();
  info.verbosity = so.verbosity;
  // Off pmem a put is durable only after a sync: one per batch of commands.
  info.sync_before_reply = !so.async && !(*cache)->store_stats().is_pmem;
  return pmcached::serve(cache->get(), so, &info);
}
