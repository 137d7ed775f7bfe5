// pmcached::Session: memcached's protocols (text, meta, and binary for a
// connection that starts with 0x80) for one connection, apart
// from any network code: bytes in, replies out. The server feeds it what a
// socket delivered and sends what it wrote; tests and the fuzzer feed it
// directly.
//
// Replies and error strings are memcached 1.6's (protocol.txt), so that
// clients written for memcached see no difference.
//
// Thread safety: one Session per connection, used by one thread at a time.
#ifndef PMCACHED_PROTOCOL_H_
#define PMCACHED_PROTOCOL_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cache.h"
#include "prefix_stats.h"

namespace pmcached {

// Server-wide figures that `stats` reports, kept by the server.
struct ServerInfo {
  std::atomic<uint64_t> curr_connections{0}, total_connections{0}, rejected_connections{0};
  std::atomic<uint64_t> bytes_read{0}, bytes_written{0};
  uint64_t max_connections = 1024;
  int threads = 4;
  int64_t started = 0;  // unix seconds
  std::atomic<int> verbosity{0};
  std::string version;
  bool sync_before_reply = false;  // group commit (a store that is not on pmem)
  PrefixStats prefixes;            // stats detail
  // stats conns: appends the STAT lines of the listening socket and of
  // every connection (set by the server while it serves).
  std::function<void(std::string*)> list_conns;
};

// The longest command line: past it, a connection is closed (as memcached
// does), except for retrieval lines of many keys.
inline constexpr size_t kMaxLine = 8 << 10;
inline constexpr std::string_view kBadFormat = "CLIENT_ERROR bad command line format";
inline constexpr std::string_view kTooLarge = "SERVER_ERROR object too large for cache";

// Numbers as memcached's safe_strtol and safe_strtoul read them: strtol's
// syntax, then the end or white space, and the low 32 bits of what was
// read (memcached stores a long into 32 bits: an exptime of 99999999999
// is a time in 2008, flags of 2^32 are 0). A '-' fails parse_u32_wrap.
bool parse_i32(std::string_view s, int32_t* out);
bool parse_u32_wrap(std::string_view s, uint32_t* out);
inline constexpr size_t kMaxRetrievalLine = 1 << 20;

class Session {
 public:
  Session(Cache* cache, ServerInfo* info) : cache_(cache), info_(info) {}

  // Executes the complete commands at the front of `in`, appending the
  // replies to *out, until *out holds `out_limit` bytes or more; returns
  // how many bytes of `in` it used (the rest, commands not run yet or an
  // incomplete one, is to be fed again, with more bytes behind it or once
  // the replies have been sent). The limit keeps pipelined gets of large
  // items, and one get of many, from making replies of gigabytes: a get
  // whose reply reaches it stops between two values and goes on at the
  // next feed (see streaming()).
  size_t feed(std::string_view in, std::string* out, size_t out_limit = SIZE_MAX);
  // A get's reply stopped at the limit: feed again once *out is sent, even
  // with no more input.
  bool streaming() const { return get_.streaming || dumping_; }

  // The connection is to be closed once *out is sent (quit, a line too long,
  // a malformed binary request).
  bool closing() const { return closing_; }
  // Some command changed an item since the last call (the server makes the
  // changes durable before it sends the replies).
  bool take_wrote() {
    const bool w = wrote_;
    wrote_ = false;
    return w;
  }

 private:
  struct Pending {  // a storage command waiting for its data block
    StoreMode mode = StoreMode::kSet;
    std::string key;
    uint32_t flags = 0;
    int64_t exptime = 0;
    std::optional<uint64_t> cas;  // cas, or ms with C
    size_t bytes = 0;
    bool noreply = false;
    bool meta = false;   // ms: replies with meta codes and flags
    bool quiet = false;  // ms q: no HD
    uint32_t state = 0;  // ms: kKeyBinary (b), kStale (I)
    std::vector<std::string> meta_flags;
  };

  void command(std::string_view line, std::string* out);
  void storage(StoreMode mode, std::string_view* tok, size_t n, std::string* out);
  // Waits for the data block of p (or drops one over the item size limit).
  void await_data(Pending p, int64_t bytes, std::string* out);
  void data_block(std::string_view block, std::string* out);
  // A get, gets, gat or gats whose reply stopped at the feed's limit
  // streams: the keys not yet answered wait in `rest`.
  struct Retrieval {
    bool cas = false, touch = false;
    int64_t exptime = 0;
    bool streaming = false;  // stopped at the limit; rest[at..] to answer
    std::string rest;        // space-separated keys
    size_t at = 0;
  };
  void retrieval(bool cas, bool touch, std::string_view* tok, size_t n, std::string* out);
  // Appends the VALUE lines of `keys` (space-separated) and END, stopping
  // when *out reaches the feed's limit.
  void values(std::string_view keys, std::string* out);
  void delta(bool incr, std::string_view* tok, size_t n, std::string* out);
  // admin.cc: stats and its subcommands; lru_crawler.
  void stats(std::string_view* tok, size_t n, std::string* out);
  void stats_detail(std::string_view what, std::string* out);
  void cachedump(std::string_view* tok, size_t n, std::string* out);
  void lru_crawler(std::string_view* tok, size_t n, std::string* out);
  // Appends metadump lines from shard dump_shard_ on, until the feed's
  // limit; then END.
  void metadump(std::string* out);
  // The meta protocol (mg, ms, md, ma, me; meta.cc): flags after the key.
  void meta_get(std::string_view* tok, size_t n, std::string* out);
  void meta_set(std::string_view* tok, size_t n, std::string* out);
  // ms's reply once its data block is stored (r: kStored to kNotFound).
  void meta_set_reply(StoreResult r, uint64_t cas, std::string* out);
  void meta_delete(std::string_view* tok, size_t n, std::string* out);
  void meta_arithmetic(std::string_view* tok, size_t n, std::string* out);
  void meta_debug(std::string_view* tok, size_t n, std::string* out);
  // The binary protocol (binary.cc). binary_request runs the request at
  // the front of `in` and returns the bytes it used; 0 while it is
  // incomplete.
  struct BinRequest;
  size_t binary_request(std::string_view in, std::string* out);
  static bool known(uint8_t op);  // an opcode served (its loud form)
  bool bin_valid(const BinRequest& r) const;
  // Answers a request whose lengths do not fit its opcode; the connection
  // closes, as memcached's.
  size_t bin_protocol_error(const BinRequest& r, std::string* out, size_t used);
  void bin_dispatch(const BinRequest& r, std::string* out);
  void bin_get(const BinRequest& r, std::string* out);
  void bin_store(const BinRequest& r, std::string* out);
  void bin_too_large(const BinRequest& r, std::string* out);
  void bin_delta(const BinRequest& r, std::string* out);
  void bin_stat(const BinRequest& r, std::string* out);
  void bin_reply(const BinRequest& r, uint16_t status, std::string_view extras,
                 std::string_view key, std::string_view value, uint64_t cas, std::string* out);
  // An error reply: `text`, or memcached's text for the status.
  void bin_error(const BinRequest& r, uint16_t status, std::string* out,
                 std::string_view text = {});
  void reply(std::string* out, std::string_view s);
  void server_error(std::string* out, const Status& s);

  Cache* cache_;
  ServerInfo* info_;
  bool has_pending_ = false;
  Pending pending_;
  Retrieval get_;
  bool dumping_ = false;  // an lru_crawler metadump streams
  size_t dump_shard_ = 0;
  size_t out_limit_ = SIZE_MAX;
  uint64_t swallow_ = 0;  // bytes of a refused data block still to drop
  bool noreply_ = false;  // the current command's replies are suppressed
  bool closing_ = false;
  bool wrote_ = false;
  bool started_ = false;  // a first byte came
  bool binary_ = false;   // it was 0x80: the binary protocol, to the end
};

}  // namespace pmcached

#endif  // PMCACHED_PROTOCOL_H_
