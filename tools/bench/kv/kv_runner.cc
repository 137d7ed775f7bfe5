#include "bench/kv/kv_runner.h"

#include <fmt/format.h>

#include <sys/resource.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "bench/common/workload.h"

namespace pm::bench {

namespace {

struct Worker {
  LatencyHistogram get_ns, put_ns;
  Status error;
};

struct Signals {
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::atomic<bool> stop{false};
  std::atomic<bool> failed{false};
};

Status check_value(uint64_t i, const std::string& got) {
  if (got.size() == kValueBytes &&
      value_id(reinterpret_cast<const unsigned char*>(got.data())) == i) {
    return Status();
  }
  return Status::corruption(fmt::format(
      "get of key #{} returned a value of {} bytes that is not its own", i, got.size()));
}

void work(KvEngine& engine, const std::vector<uint32_t>& stream, int put_percent, uint64_t seed,
          Signals& sig, Worker* w) {
  Rng rng(seed);
  unsigned char key[kKeyBytes], value[kValueBytes];
  std::string got;
  got.reserve(kValueBytes);
  size_t pos = 0;
  uint8_t version = 0;
  sig.ready.fetch_add(1);
  while (!sig.go.load(std::memory_order_acquire)) std::this_thread::yield();
  uint64_t t0 = now_ns();
  while (!sig.stop.load(std::memory_order_relaxed)) {
    const uint64_t i = stream[pos];
    pos = pos + 1 == stream.size() ? 0 : pos + 1;
    make_key(i, key);
    const bool is_put = rng.below(100) < uint64_t(put_percent);
    Status s;
    if (is_put) {
      make_value(i, value);
      value[sizeof(uint64_t)] = ++version;  // a real change; value_id stays i
      s = engine.put(bytes_view(key, kKeyBytes), bytes_view(value, kValueBytes));
    } else {
      s = engine.get(bytes_view(key, kKeyBytes), &got);
      if (s.is_not_found()) s = Status::corruption(fmt::format("get of key #{} found nothing", i));
      if (s.ok()) s = check_value(i, got);
    }
    const uint64_t t1 = now_ns();
    (is_put ? w->put_ns : w->get_ns).record(t1 - t0);
    t0 = t1;
    if (!s.ok()) {
      w->error = s;
      sig.failed.store(true);
      return;
    }
  }
}

}  // namespace

// User and system time of every thread of the process so far.
static double process_cpu_seconds() {
  struct rusage u {};
  ::getrusage(RUSAGE_SELF, &u);
  auto s = [](const timeval& t) { return double(t.tv_sec) + double(t.tv_usec) / 1e6; };
  return s(u.ru_utime) + s(u.ru_stime);
}

Result<CellResult> run_cell(KvEngine& engine, const CellSpec& spec, const KeyStreams& streams,
                            double seconds) {
  Signals sig;
  std::vector<Worker> workers(size_t(spec.threads));
  std::vector<std::thread> threads;
  for (int t = 0; t < spec.threads; t++) {
    threads.emplace_back(work, std::ref(engine), std::cref(streams.stream(spec.choice, t)),
                         spec.put_percent, uint64_t(t) * 7919 + 1, std::ref(sig),
                         &workers[size_t(t)]);
  }
  while (sig.ready.load() < spec.threads) std::this_thread::yield();
  const double cpu_start = process_cpu_seconds();
  const uint64_t start = now_ns();
  sig.go.store(true, std::memory_order_release);
  const uint64_t until = start + uint64_t(seconds * 1e9);
  while (!sig.failed.load() && now_ns() < until) {
    const uint64_t left = until - std::min(until, now_ns());
    std::this_thread::sleep_for(std::chrono::nanoseconds(std::min<uint64_t>(left, 10'000'000)));
  }
  sig.stop.store(true);
  for (std::thread& t : threads) t.join();
  CellResult r;
  r.spec = spec;
  r.seconds = double(now_ns() - start) / 1e9;
  r.cpu_seconds = process_cpu_seconds() - cpu_start;
  for (const Worker& w : workers) {
    if (!w.error.ok()) return w.error;
    r.get_ns.merge(w.get_ns);
    r.put_ns.merge(w.put_ns);
  }
  return r;
}

}  // namespace pm::bench
