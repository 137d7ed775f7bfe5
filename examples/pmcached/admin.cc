// Session's administrative commands: stats (its subcommands, the dumps of
// stats cachedump and stats detail) and lru_crawler (metadump streams every
// item's metadata: memcached-tool's dump and keys read it).
#include <sys/resource.h>
#include <unistd.h>

#include <cctype>
#include <iterator>

#include <fmt/format.h>

#include "protocol.h"

namespace pmcached {

namespace {

// memcached's slab classes are numbered 1 to 63; pmcached's one class is 1.
constexpr uint32_t kClasses = 64;

// memcached's uriencode: all but letters, digits and "-._~" as %XX.
void uri_encode(std::string_view s, std::string* out) {
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~') {
      out->push_back(ch);
    } else {
      fmt::format_to(std::back_inserter(*out), "%{:02X}", c);
    }
  }
}

// The classes a crawl names ("all", "hash", or numbers separated by
// commas): false when one is not a class (BADCLASS); *ours when the items
// are among them, *none when no class is named.
bool parse_classes(std::string_view arg, bool* ours, bool* none) {
  *ours = arg == "all" || arg == "hash";
  *none = false;
  if (*ours) return true;
  bool any = false;
  for (size_t at = 0; at <= arg.size();) {
    const size_t end = std::min(arg.find(',', at), arg.size());
    const std::string_view id = arg.substr(at, end - at);
    at = end + 1;
    if (id.empty()) continue;  // (strtok skips empty fields)
    uint32_t n = 0;
    if (!parse_u32_wrap(id, &n) || n < 1 || n >= kClasses) return false;
    *ours |= n == 1;
    any = true;
  }
  *none = !any;
  return true;
}

}  // namespace

void Session::stats(std::string_view* tok, size_t n, std::string* out) {
  auto stat = [&](std::string_view name, const auto& v) {
    fmt::format_to(std::back_inserter(*out), "STAT {} {}\r\n", name, v);
  };
  const CacheOptions& o = cache_->options();
  if (n == 1) {
    const CacheStats s = cache_->stats();
    const int64_t now = cache_->now();
    struct rusage ru {};
    ::getrusage(RUSAGE_SELF, &ru);
    stat("pid", ::getpid());
    stat("uptime", now - info_->started);
    stat("time", now);
    stat("version", info_->version);
    stat("pointer_size", sizeof(void*) * 8);
    stat("rusage_user", fmt::format("{}.{:06}", ru.ru_utime.tv_sec, ru.ru_utime.tv_usec));
    stat("rusage_system", fmt::format("{}.{:06}", ru.ru_stime.tv_sec, ru.ru_stime.tv_usec));
    stat("max_connections", info_->max_connections);
    stat("curr_connections", info_->curr_connections.load());
    stat("total_connections", info_->total_connections.load());
    stat("rejected_connections", info_->rejected_connections.load());
    stat("cmd_get", s.cmd_get);
    stat("cmd_set", s.cmd_set);
    stat("cmd_flush", s.cmd_flush);
    stat("cmd_touch", s.cmd_touch);
    stat("get_hits", s.get_hits);
    stat("get_misses", s.get_misses);
    stat("get_expired", s.get_expired);
    stat("get_flushed", s.get_flushed);
    stat("delete_misses", s.delete_misses);
    stat("delete_hits", s.delete_hits);
    stat("incr_misses", s.incr_misses);
    stat("incr_hits", s.incr_hits);
    stat("decr_misses", s.decr_misses);
    stat("decr_hits", s.decr_hits);
    stat("cas_misses", s.cas_misses);
    stat("cas_hits", s.cas_hits);
    stat("cas_badval", s.cas_badval);
    stat("touch_hits", s.touch_hits);
    stat("touch_misses", s.touch_misses);
    stat("bytes_read", info_->bytes_read.load());
    stat("bytes_written", info_->bytes_written.load());
    stat("limit_maxbytes", o.memory_limit);
    stat("threads", info_->threads);
    stat("bytes", s.bytes);
    stat("curr_items", s.curr_items);
    stat("total_items", s.total_items);
    stat("evictions", s.evictions);
    stat("reclaimed", s.reclaimed);
    stat("index_ready", s.index_ready ? 1 : 0);
    out->append("END\r\n");
    return;
  }
  const std::string_view what = tok[1];
  if (what == "reset" && n == 2) {
    cache_->reset_stats();
    info_->prefixes.clear();
    return reply(out, "RESET");
  }
  if (what == "detail") return stats_detail(n < 3 ? "" : tok[2], out);
  if (what == "conns" && info_->list_conns) {
    info_->list_conns(out);
    out->append("END\r\n");
    return;
  }
  if (what == "cachedump") return cachedump(tok, n, out);
  if (what == "sizes" && n == 2) {
    // memcached tracks item sizes only with -o track_sizes.
    stat("sizes_status", "disabled");
    out->append("END\r\n");
    return;
  }
  if (what == "settings" && n == 2) {
    stat("maxbytes", o.memory_limit);
    stat("maxconns", info_->max_connections);
    stat("num_threads", info_->threads);
    stat("evictions", o.evict ? "on" : "off");
    stat("item_size_max", o.item_max);
    stat("verbosity", info_->verbosity.load());
    stat("cas_enabled", "yes");
    stat("durability", info_->sync_before_reply ? "group commit" : "per write");
    out->append("END\r\n");
    return;
  }
  if ((what == "items" || what == "slabs") && n == 2) {
    // One class holds every item: there are no slabs to report on.
    const CacheStats s = cache_->stats();
    if (what == "items") {
      if (s.curr_items > 0) {
        stat("items:1:number", s.curr_items);
        stat("items:1:evicted", s.evictions);
        stat("items:1:reclaimed", s.reclaimed);
      }
    } else {
      stat("active_slabs", s.curr_items > 0 ? 1 : 0);
      stat("total_malloced", s.bytes);
    }
    out->append("END\r\n");
    return;
  }
  reply(out, "ERROR");
}

void Session::stats_detail(std::string_view what, std::string* out) {
  if (what == "on" || what == "off") {
    info_->prefixes.enable(what == "on");
    return reply(out, "OK");
  }
  if (what == "dump") return info_->prefixes.dump(out);
  reply(out, "CLIENT_ERROR usage: stats detail on|off|dump");
}

// stats cachedump <class> <limit>: "ITEM <key> [<bytes> b; <expiry> s]" per
// item, at most `limit` (0: all) and 2 MB, as memcached (which lists one
// of the class's LRUs). Keys that start with a NUL byte are left out, and
// a key is printed up to its first NUL; memcached leaves out every key
// stored in base64 (the DRAM index does not know which were).
void Session::cachedump(std::string_view* tok, size_t n, std::string* out) {
  if (n < 4) return reply(out, "CLIENT_ERROR bad command line");
  uint32_t id = 0, limit = 0;
  if (!parse_u32_wrap(tok[2], &id) || !parse_u32_wrap(tok[3], &limit)) {
    return reply(out, kBadFormat);
  }
  if (id >= kClasses) return reply(out, "CLIENT_ERROR Illegal slab id");
  constexpr size_t kMost = 2 << 20;
  const size_t start = out->size();
  uint64_t shown = 0;
  bool full = false;
  for (size_t shard = 0; id == 1 && !full && shard < Cache::kDumpShards; shard++) {
    cache_->dump(shard, [&](const Cache::DumpedItem& it) {
      full |= limit != 0 && shown >= limit;
      if (full || it.key.empty() || it.key[0] == '\0') return;
      const std::string line = fmt::format("ITEM {} [{} b; {} s]\r\n",
                                           it.key.substr(0, it.key.find('\0')), it.data_bytes,
                                           it.exptime);
      full = out->size() - start + line.size() + 6 > kMost;  // (memcached's END\r\n\0)
      if (full) return;
      out->append(line);
      shown++;
    });
  }
  out->append("END\r\n");
}

void Session::lru_crawler(std::string_view* tok, size_t n, std::string* out) {
  const std::string_view what = n > 1 ? tok[1] : "";
  if (n == 2 && (what == "enable" || what == "disable")) return reply(out, "OK");
  if (n != 3) return reply(out, "ERROR");
  if (what == "crawl" || what == "metadump") {
    bool ours = false, none = false;
    if (!parse_classes(tok[2], &ours, &none)) return reply(out, "BADCLASS invalid class id");
    if (none) return reply(out, "NOTSTARTED no items to crawl");
    if (what == "crawl") {
      // memcached walks its hash table for metadumps only.
      if (tok[2] == "hash") return reply(out, "ERROR an unknown error happened");
      // What memcached's crawler does: expired and flushed items go now
      // (here, on this connection's thread: an admin command).
      if (ours) cache_->sweep(0, Cache::kDumpShards);
      return reply(out, "OK");
    }
    dump_shard_ = ours ? 0 : Cache::kDumpShards;
    dumping_ = true;
    return metadump(out);
  }
  uint32_t v = 0;
  if (what == "tocrawl" || what == "sleep") {
    if (!parse_u32_wrap(tok[2], &v)) return reply(out, kBadFormat);
    if (what == "sleep" && v > 1000000) {
      return reply(out, "CLIENT_ERROR sleep must be one second or less");
    }
    return reply(out, "OK");
  }
  reply(out, "ERROR");
}

// "key=<uri-encoded> exp=<unix time, -1: never> la=<unix time> cas=<n>
// fetch=<yes|no> cls=1 size=<bytes>\n" per item (memcached ends these
// lines with \n alone), then "END\r\n"; a shard at a time, so that a dump
// of millions of items streams within the feed's output limit.
void Session::metadump(std::string* out) {
  for (; dump_shard_ < Cache::kDumpShards; dump_shard_++) {
    if (out->size() >= out_limit_) return;  // the rest once this part is sent
    cache_->dump(dump_shard_, [&](const Cache::DumpedItem& it) {
      out->append("key=");
      uri_encode(it.key, out);
      fmt::format_to(std::back_inserter(*out), " exp={} la={} cas={} fetch={} cls=1 size={}\n",
                     it.exptime == 0 ? -1 : it.exptime, it.last_access, it.cas,
                     it.fetched ? "yes" : "no", it.bytes);
    });
  }
  dumping_ = false;
  out->append("END\r\n");
}

}  // namespace pmcached
