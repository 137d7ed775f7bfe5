// pmcached's network side: libevent (as memcached itself), one event loop
// per worker thread, all accepting on one listening socket; each connection
// is a Session (protocol.h). Replies to commands that changed items are sent
// only once the changes are durable: at once on pmem (every put persists),
// after one sync() per batch of commands read elsewhere (group commit),
// unless --async.
#ifndef PMCACHED_SERVER_H_
#define PMCACHED_SERVER_H_

#include <cstdint>
#include <string>

#include "cache.h"
#include "protocol.h"

namespace pmcached {

struct ServerOptions {
  std::string listen = "127.0.0.1";
  int port = 11211;  // 0: any free port (printed)
  int threads = 4;
  uint64_t max_connections = 1024;
  int idle_timeout_s = 0;  // 0: never close idle connections
  bool async = false;      // reply before the changes are durable (weaker)
  int verbosity = 0;
};

// Serves until SIGTERM or SIGINT, then checkpoints the cache (a clean stop:
// the next start replays no log). Returns the process exit code.
int serve(Cache* cache, const ServerOptions& o, ServerInfo* info);

}  // namespace pmcached

#endif  // PMCACHED_SERVER_H_
