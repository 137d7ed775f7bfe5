#include "server.h"

#include <arpa/inet.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <event2/thread.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_set>
#include <vector>

namespace pmcached {

namespace {

// A client that does not read its replies stops being read from once this
// much waits to be sent, and is read again below the low mark.
constexpr size_t kOutputHigh = 4 << 20;
constexpr size_t kOutputLow = 1 << 20;

struct Worker;

struct Conn {
  Conn(Worker* w, bufferevent* b, Cache* c, ServerInfo* i) : worker(w), bev(b), session(c, i) {}
  Worker* worker;
  bufferevent* bev;
  Session session;
  // For stats conns (read from other workers' threads).
  int fd = -1;
  std::string addr;                    // the client's, as memcached prints it
  std::atomic<int64_t> last_cmd{0};    // unix seconds of the last input served
  std::atomic<bool> serving{false};    // running its commands now
  std::string in, out;
  bool stalled = false;  // commands (or a get's values) wait until the replies drain
  bool eof = false;      // the client sent all it will (a half-close)
};

struct Worker {
  Cache* cache;
  ServerInfo* info;
  const ServerOptions* o;
  event_base* base = nullptr;
  evconnlistener* listener = nullptr;
  std::mutex conns_mu;  // the worker changes conns under it; stats conns reads them
  std::unordered_set<Conn*> conns;
  std::thread thread;
};

// "tcp:<ip>:<port>" (or tcp6:[<ip>]:<port>), as memcached's stats conns.
std::string address_of(const sockaddr_storage& ss) {
  char ip[INET6_ADDRSTRLEN] = "?";
  if (ss.ss_family == AF_INET) {
    const auto& a = reinterpret_cast<const sockaddr_in&>(ss);
    ::inet_ntop(AF_INET, &a.sin_addr, ip, sizeof ip);
    return "tcp:" + std::string(ip) + ":" + std::to_string(ntohs(a.sin_port));
  }
  const auto& a = reinterpret_cast<const sockaddr_in6&>(ss);
  ::inet_ntop(AF_INET6, &a.sin6_addr, ip, sizeof ip);
  return "tcp6:[" + std::string(ip) + "]:" + std::to_string(ntohs(a.sin6_port));
}

// stats conns: the listening socket, then every connection, by descriptor.
void list_conns(const std::vector<std::unique_ptr<Worker>>& workers, int listen_fd,
                const std::string& listen_addr, int64_t started, int64_t now, std::string* out) {
  struct Row {
    int fd;
    std::string addr;
    bool serving;
    int64_t last_cmd;
  };
  std::vector<Row> rows;
  for (const auto& w : workers) {
    std::lock_guard<std::mutex> l(w->conns_mu);
    for (const Conn* c : w->conns) {
      rows.push_back({c->fd, c->addr, c->serving.load(), c->last_cmd.load()});
    }
  }
  std::sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) { return a.fd < b.fd; });
  auto stat = [&](int fd, std::string_view name, const auto& v) {
    out->append("STAT " + std::to_string(fd) + ":" + std::string(name) + " " + v + "\r\n");
  };
  stat(listen_fd, "addr", listen_addr);
  stat(listen_fd, "state", std::string("conn_listening"));
  stat(listen_fd, "secs_since_last_cmd", std::to_string(now - started));
  for (const Row& r : rows) {
    stat(r.fd, "addr", r.addr);
    stat(r.fd, "listen_addr", listen_addr);
    stat(r.fd, "state", std::string(r.serving ? "conn_parse_cmd" : "conn_waiting"));
    stat(r.fd, "secs_since_last_cmd", std::to_string(now - r.last_cmd));
  }
}

void close_conn(Conn* c) {
  {
    std::lock_guard<std::mutex> l(c->worker->conns_mu);
    c->worker->conns.erase(c);
  }
  c->worker->info->curr_connections--;
  bufferevent_free(c->bev);
  delete c;
}

void serve_input(bufferevent* bev, Conn* c);

// Closes once everything is sent when the session ended or the client
// half-closed with nothing left to run; else reads again below the low
// mark, or runs what waits once the replies have drained.
void on_write(bufferevent* bev, void* arg) {
  auto* c = static_cast<Conn*>(arg);
  const size_t pending = evbuffer_get_length(bufferevent_get_output(bev));
  if (c->session.closing() || (c->eof && !c->stalled)) {
    if (pending == 0) close_conn(c);
    return;
  }
  if (pending > kOutputLow) return;
  if (c->stalled) return serve_input(bev, c);
  bufferevent_enable(bev, EV_READ);
}

// Replies with one error line, then closes the connection once it is sent
// (what was queued before it is sent first).
void fail_conn(bufferevent* bev, Conn* c, std::string_view error) {
  c->out.clear();
  c->out.shrink_to_fit();
  c->in.clear();
  c->in.shrink_to_fit();
  c->session = Session(c->worker->cache, c->worker->info);
  const std::string line = "SERVER_ERROR " + std::string(error) + "\r\n";
  bufferevent_write(bev, line.data(), line.size());
  bufferevent_disable(bev, EV_READ);
  // Closed once everything queued is sent (the write callback runs below
  // the low mark, not only when empty), or at once on an error.
  bufferevent_setcb(
      bev, nullptr,
      [](bufferevent* b, void* a) {
        if (evbuffer_get_length(bufferevent_get_output(b)) == 0) close_conn(static_cast<Conn*>(a));
      },
      [](bufferevent*, short what, void* a) {
        if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR | BEV_EVENT_TIMEOUT)) close_conn(static_cast<Conn*>(a));
      },
      c);
}

// Sends c->out now when nothing waits before it; what the socket does not
// take, the bufferevent sends. Queued first, every reply cost an epoll_ctl
// to watch the socket, an epoll_wait and an epoll_ctl more. (libevent's
// evbuffer_write cannot do this: a socket bufferevent freezes the start of
// its output, so it sends nothing.) A failed send queues it all: the
// bufferevent's own write then reports the error.
void send_replies(bufferevent* bev, Conn* c) {
  const std::string& out = c->out;
  c->worker->info->bytes_written += out.size();
  size_t sent = 0;
  if (evbuffer_get_length(bufferevent_get_output(bev)) == 0) {
    const ssize_t n = ::send(bufferevent_getfd(bev), out.data(), out.size(),
                             MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) sent = static_cast<size_t>(n);
  }
  if (sent < out.size()) bufferevent_write(bev, out.data() + sent, out.size() - sent);
  c->out.clear();
}

// Runs the complete commands waiting in c->in, until the replies waiting
// to be sent reach the high mark, and sends their replies.
void serve_input(bufferevent* bev, Conn* c) {
  evbuffer* output = bufferevent_get_output(bev);
  // A libevent callback: nothing may throw out of it. Out of DRAM for a
  // request or its reply fails this connection, not the server.
  try {
    const size_t pending = evbuffer_get_length(output);
    const size_t limit = pending < kOutputHigh ? kOutputHigh - pending : 0;
    c->serving = true;
    c->last_cmd = c->worker->cache->now();
    const size_t used = c->session.feed(c->in, &c->out, limit);
    c->serving = false;
    c->in.erase(0, used);
    c->stalled = c->out.size() >= limit && (!c->in.empty() || c->session.streaming());
  } catch (const std::bad_alloc&) {
    c->serving = false;
    return fail_conn(bev, c, "out of memory");
  }
  // Group commit: the changes these replies acknowledge are durable first.
  if (c->session.take_wrote() && c->worker->info->sync_before_reply) {
    Status s = c->worker->cache->sync();
    if (!s.ok()) return fail_conn(bev, c, s.message());
  }
  if (!c->out.empty()) send_replies(bev, c);
  const size_t pending = evbuffer_get_length(output);
  if (c->session.closing() || (c->eof && !c->stalled)) {
    bufferevent_disable(bev, EV_READ);
    if (pending == 0) close_conn(c);
    return;
  }
  if (c->stalled || pending > kOutputHigh) {
    bufferevent_disable(bev, EV_READ);  // on_write goes on
    // The socket took the replies, so no write callback comes by itself:
    // one is asked for, deferred, so that the loop serves the worker's
    // other connections first (a get of 500,000 values is not served in
    // one go).
    if (c->stalled && pending <= kOutputLow) {
      bufferevent_trigger(bev, EV_WRITE, BEV_TRIG_IGNORE_WATERMARKS | BEV_TRIG_DEFER_CALLBACKS);
    }
  } else if (!c->eof && (bufferevent_get_enabled(bev) & EV_READ) == 0) {
    bufferevent_enable(bev, EV_READ);
  }
}

void on_read(bufferevent* bev, void* arg) {
  auto* c = static_cast<Conn*>(arg);
  try {
    evbuffer* input = bufferevent_get_input(bev);
    const size_t n = evbuffer_get_length(input);
    const size_t old = c->in.size();
    c->in.resize(old + n);
    evbuffer_remove(input, c->in.data() + old, n);
    c->worker->info->bytes_read += n;
  } catch (const std::bad_alloc&) {
    return fail_conn(bev, c, "out of memory");
  }
  serve_input(bev, c);
}

// A client that half-closes (shutdown(SHUT_WR), `nc -N`) still gets every
// reply to what it sent; an error or a timeout closes at once.
void on_event(bufferevent* bev, short what, void* arg) {
  auto* c = static_cast<Conn*>(arg);
  // An EOF while writing: the client is gone for replies too.
  if (what & (BEV_EVENT_ERROR | BEV_EVENT_TIMEOUT | BEV_EVENT_WRITING)) return close_conn(c);
  if (what & BEV_EVENT_EOF) {
    c->eof = true;
    bufferevent_disable(bev, EV_READ);
    if (!c->stalled && evbuffer_get_length(bufferevent_get_output(bev)) == 0) close_conn(c);
  }
}

void on_accept(evconnlistener*, evutil_socket_t fd, sockaddr*, int, void* arg) {
  auto* w = static_cast<Worker*>(arg);
  // Reserve the slot before checking it: every worker accepts from one
  // listening socket, and a load-then-increment let two of them admit one
  // connection over -c between them.
  if (w->info->curr_connections.fetch_add(1) >= w->o->max_connections) {
    w->info->curr_connections--;
    static const char kFull[] = "ERROR Too many open connections\r\n";
    (void)!::send(fd, kFull, sizeof kFull - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
    ::close(fd);
    w->info->rejected_connections++;
    return;
  }
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  bufferevent* bev = bufferevent_socket_new(w->base, fd, BEV_OPT_CLOSE_ON_FREE);
  if (bev == nullptr) {
    w->info->curr_connections--;
    ::close(fd);
    return;
  }
  auto* c = new Conn(w, bev, w->cache, w->info);
  c->fd = fd;
  sockaddr_storage peer{};
  socklen_t len = sizeof peer;
  c->addr = ::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &len) == 0 ? address_of(peer)
                                                                            : "unknown";
  c->last_cmd = w->cache->now();
  {
    std::lock_guard<std::mutex> l(w->conns_mu);
    w->conns.insert(c);
  }
  w->info->total_connections++;
  bufferevent_setcb(bev, on_read, on_write, on_event, c);
  bufferevent_setwatermark(bev, EV_WRITE, kOutputLow, 0);
  if (w->o->idle_timeout_s > 0) {
    const timeval tv{w->o->idle_timeout_s, 0};
    bufferevent_set_timeouts(bev, &tv, nullptr);
  }
  bufferevent_enable(bev, EV_READ | EV_WRITE);
}

// What stops the server: SIGTERM or SIGINT, or a store found damaged.
struct Stop {
  std::vector<std::unique_ptr<Worker>>* workers;
  event_base* main;
  Cache* cache;
  Status failed;  // why the server stops on its own
};

void stop_all(Stop* st) {
  for (auto& w : *st->workers) event_base_loopexit(w->base, nullptr);
  event_base_loopexit(st->main, nullptr);
}

// The listening socket, shared by every worker's loop.
int listen_on(const ServerOptions& o, int* port) {
  addrinfo hints{}, *res = nullptr;
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  const std::string service = std::to_string(o.port);
  if (int err = ::getaddrinfo(o.listen.c_str(), service.c_str(), &hints, &res); err != 0) {
    std::fprintf(stderr, "pmcached: -l %s: %s\n", o.listen.c_str(), gai_strerror(err));
    return -1;
  }
  int fd = ::socket(res->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  int one = 1;
  if (fd >= 0) ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (fd < 0 || ::bind(fd, res->ai_addr, res->ai_addrlen) != 0 || ::listen(fd, 1024) != 0) {
    std::fprintf(stderr, "pmcached: listen on %s:%d: %s\n", o.listen.c_str(), o.port,
                 std::strerror(errno));
    if (fd >= 0) ::close(fd);
    ::freeaddrinfo(res);
    return -1;
  }
  ::freeaddrinfo(res);
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len);
  *port = ntohs(ss.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port
                                         : reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
  return fd;
}

}  // namespace

int serve(Cache* cache, const ServerOptions& o, ServerInfo* info) {
  evthread_use_pthreads();
  std::signal(SIGPIPE, SIG_IGN);
  int port = 0;
  const int fd = listen_on(o, &port);
  if (fd < 0) return 1;
  info->threads = o.threads;
  info->max_connections = o.max_connections;
  std::vector<std::unique_ptr<Worker>> workers;
  for (int i = 0; i < o.threads; i++) {
    auto w = std::make_unique<Worker>();
    w->cache = cache;
    w->info = info;
    w->o = &o;
    w->base = event_base_new();
    w->listener = evconnlistener_new(w->base, on_accept, w.get(), LEV_OPT_REUSEABLE, -1, fd);
    if (w->base == nullptr || w->listener == nullptr) {
      std::fprintf(stderr, "pmcached: cannot start event loop %d\n", i);
      return 1;
    }
    workers.push_back(std::move(w));
  }
  // (Before any worker runs: sessions read it.)
  sockaddr_storage self{};
  socklen_t self_len = sizeof self;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&self), &self_len);
  info->list_conns = [&workers, fd, addr = address_of(self), info, cache](std::string* out) {
    list_conns(workers, fd, addr, info->started, cache->now(), out);
  };
  // The main thread waits for SIGTERM or SIGINT; the workers serve.
  Stop stop_ctx{&workers, event_base_new(), cache, Status()};
  auto stop = [](evutil_socket_t, short, void* arg) { stop_all(static_cast<Stop*>(arg)); };
  // A store whose index cannot be rebuilt (damage the open did not see)
  // stops the server with the reason, rather than serve without expiry
  // and memory limits.
  auto watch = [](evutil_socket_t, short, void* arg) {
    auto* st = static_cast<Stop*>(arg);
    Status s = st->cache->index_error();
    // Out of DRAM for the index is not damage: the server runs on without
    // it (no expiry sweep, no memory limit), as it did before.
    if (s.ok() || s.code() == pm::Code::kNoSpace || !st->failed.ok()) return;
    st->failed = s;
    stop_all(st);
  };
  event_base* main_base = stop_ctx.main;
  event* term = evsignal_new(main_base, SIGTERM, stop, &stop_ctx);
  event* intr = evsignal_new(main_base, SIGINT, stop, &stop_ctx);
  evsignal_add(term, nullptr);
  evsignal_add(intr, nullptr);
  // Activated from the rebuild's thread (libevent is thread-safe here).
  event* watcher = event_new(main_base, -1, 0, watch, &stop_ctx);
  cache->on_index_done([watcher] { event_active(watcher, 0, 0); });
  for (auto& w : workers) {
    w->thread = std::thread([wp = w.get()] { event_base_loop(wp->base, EVLOOP_NO_EXIT_ON_EMPTY); });
  }
  std::fprintf(stderr, "pmcached: listening on %s:%d\n", o.listen.c_str(), port);
  std::fflush(stderr);
  event_base_dispatch(main_base);
  for (auto& w : workers) w->thread.join();
  info->list_conns = nullptr;
  cache->on_index_done(nullptr);
  event_free(term);
  event_free(intr);
  event_free(watcher);
  // Freeing the signal events put back the actions they replaced, the
  // defaults: a second SIGTERM (timeout(1) sends one) would kill the clean
  // stop below.
  std::signal(SIGTERM, SIG_IGN);
  std::signal(SIGINT, SIG_IGN);
  event_base_free(main_base);
  for (auto& w : workers) {
    evconnlistener_free(w->listener);
    for (Conn* c : std::vector<Conn*>(w->conns.begin(), w->conns.end())) close_conn(c);
    event_base_free(w->base);
  }
  ::close(fd);
  if (!stop_ctx.failed.ok()) {
    std::fprintf(stderr,
                 "pmcached: %s\npmcached: stopped: the store cannot be read whole (damaged or "
                 "failing); check it with `pm check`, copy what reads with `pm kv salvage`\n",
                 stop_ctx.failed.to_string().c_str());
    return 1;
  }
  // A clean stop: everything applied to the backend, no log to replay.
  if (Status s = cache->checkpoint(); !s.ok()) {
    std::fprintf(stderr, "pmcached: checkpoint at stop: %s\n", s.to_string().c_str());
    return 1;
  }
  if (o.verbosity > 0) std::fprintf(stderr, "pmcached: stopped cleanly\n");
  return 0;
}

}  // namespace pmcached
