#include "bench/container/hashmap_runs.h"

#include <fmt/format.h>
#include <libpmemobj.h>

#include <algorithm>
#include <memory>
#include <string_view>

#include "bench/container/hashmap_libpm.h"
#include "bench/container/hashmap_pmemobj.h"
#include "bench/common/memory_usage.h"
#include "bench/common/scoped_file.h"
#include "bench/common/workload.h"
#include "pm/container.h"

namespace pm::bench {

namespace {

constexpr uint64_t kMiB = 1ull << 20;
constexpr uint64_t kGiB = 1ull << 30;
// Inserts per commit (or transaction) when filling the map after a capped
// timed phase: fast enough on msync, and not what is being measured.
constexpr uint64_t kFillBatch = 1000;

uint64_t round_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

struct Phase {
  uint64_t done = 0;
  double seconds = 0;
  double commit_seconds = 0;  // inside commit(), libpm only
  bool capped = false;
};

uint64_t deadline_after(double seconds) { return now_ns() + static_cast<uint64_t>(seconds * 1e9); }

// Inserts keys [first, last), committing after every `every` inserts and at
// the end. Stops at the first commit past `budget_s`.
Result<Phase> libpm_inserts(Container& c, LibpmHashMap& m, uint64_t first, uint64_t last,
                            uint64_t every, double budget_s) {
  unsigned char key[kKeyBytes], value[kValueBytes];
  const uint64_t t0 = now_ns(), deadline = deadline_after(budget_s);
  Phase p;
  uint64_t in_commit = 0;
  for (uint64_t i = first; i < last;) {
    make_key(i, key);
    make_value(i, value);
    PM_TRY(m.insert(key, value));
    i++;
    if ((i - first) % every != 0) continue;
    const uint64_t c0 = now_ns();
    PM_TRY(c.commit());
    const uint64_t c1 = now_ns();
    in_commit += c1 - c0;
    if (i < last && c1 > deadline) {
      p.capped = true;
      p.done = i - first;
      break;
    }
  }
  if (!p.capped) p.done = last - first;
  const uint64_t c0 = now_ns();
  PM_TRY(c.commit());  // the tail of a batch; a no-op when nothing is dirty
  const uint64_t c1 = now_ns();
  p.commit_seconds = double(in_commit + (c1 - c0)) / 1e9;
  p.seconds = double(c1 - t0) / 1e9;
  return p;
}

// Inserts keys [first, last) one transaction each (batch == 1) or `batch`
// per transaction. Stops at the first transaction past `budget_s`.
Result<Phase> pmemobj_inserts(PmemobjHashMap& m, uint64_t first, uint64_t last, uint64_t batch,
                              double budget_s) {
  unsigned char key[kKeyBytes], value[kValueBytes];
  const uint64_t t0 = now_ns(), deadline = deadline_after(budget_s);
  Phase p;
  for (uint64_t i = first; i < last;) {
    if (batch == 1) {
      make_key(i, key);
      make_value(i, value);
      PM_TRY(m.insert(key, value));
      i++;
    } else {
      uint64_t n = std::min(batch, last - i);
      PM_TRY(m.insert_range(i, n));
      i += n;
    }
    p.done = i - first;
    if (i < last && now_ns() > deadline) {
      p.capped = true;
      break;
    }
  }
  p.seconds = double(now_ns() - t0) / 1e9;
  return p;
}

// `count` gets of uniformly random keys among the first `present`, each
// checked against the value inserted. Returns seconds.
template <typename Map>
Result<double> timed_gets(const Map& m, uint64_t present, uint64_t count, std::string_view engine) {
  if (present == 0) return 0.0;
  Rng rng(0x5eed);
  unsigned char key[kKeyBytes];
  const uint64_t t0 = now_ns();
  for (uint64_t g = 0; g < count; g++) {
    uint64_t i = rng.below(present);
    make_key(i, key);
    const unsigned char* v = m.get(key);
    if (v == nullptr || value_id(v) != i) {
      return Status::corruption(fmt::format("{}: get of key #{} of {} found {}", engine, i, present,
                                            v ? "a wrong value" : "nothing"));
    }
  }
  return double(now_ns() - t0) / 1e9;
}

Options libpm_options(const LibpmVariant& v, const Config& cfg) {
  Options o;
  // Buckets, 128-byte nodes with slab slack, and room for the allocator.
  uint64_t need = pow2_at_least(cfg.keys) * 8 + cfg.keys * 128 * 11 / 10 + 32 * kMiB;
  o.initial_size = round_up(need, kMiB);
  o.max_size = std::max(kGiB, round_up(o.initial_size * 4, kGiB));
  o.tracker = v.tracker;
  o.release_after_commit = v.release_after_commit;
  o.uffd_chunk_mode_above = v.uffd_chunk_mode_above;
  return o;
}

Status measure_memory(Container& c, uint64_t process_anon_before, VariantResult* r) {
  ContainerInfo info = c.info();
  const uint64_t lo = info.base_address, hi = info.base_address + info.max_bytes;
  Result<RangeMemory> before = range_memory(lo, hi);
  if (!before.ok()) return before.status();
  Result<uint64_t> process_anon = process_rss_anon();
  if (!process_anon.ok()) return process_anon.status();
  PM_TRY(c.release_clean());
  Result<RangeMemory> after = range_memory(lo, hi);
  if (!after.ok()) return after.status();
  r->has_memory = true;
  r->heap_used = info.used_bytes;
  r->view_anon = before->anonymous;
  r->view_anon_released = after->anonymous;
  r->process_anon_delta =
      *process_anon > process_anon_before ? *process_anon - process_anon_before : 0;
  return Status();
}

Status check_heap(Container& c) {
  CheckReport rep = c.check();
  if (rep.problems.empty()) return Status();
  return Status::corruption(fmt::format("check() after the workload: {} problem(s), first: {}",
                                        rep.problems.size(), rep.problems.front()));
}

}  // namespace

Result<VariantResult> run_libpm(const std::string& dir, const LibpmVariant& v, const Config& cfg,
                                Budgets budgets) {
  ScopedFile file(fmt::format("{}/hashmap-{}.pm", dir, v.file_tag));
  Result<uint64_t> anon_before = process_rss_anon();
  if (!anon_before.ok()) return anon_before.status();
  Result<std::unique_ptr<Container>> c = Container::create(file.path(), libpm_options(v, cfg));
  if (!c.ok()) return c.status();
  Container& box = **c;
  Result<LibpmHashMap> map =
      LibpmHashMap::create(box, pow2_at_least(cfg.keys), v.tracker == TrackerKind::kHints);
  if (!map.ok()) return map.status();
  const double budget = v.commit_every == 1 ? budgets.insert_s : budgets.fill_s;
  Result<Phase> timed = libpm_inserts(box, *map, 0, cfg.keys, v.commit_every, budget);
  if (!timed.ok()) return timed.status();
  Result<Phase> fill = libpm_inserts(box, *map, timed->done, cfg.keys, kFillBatch, budgets.fill_s);
  if (!fill.ok()) return fill.status();
  VariantResult r;
  r.label = v.label;
  r.timed_inserts = timed->done;
  r.insert_seconds = timed->seconds;
  r.commit_seconds = timed->commit_seconds;
  r.budget_s = budget;
  r.capped = timed->capped;
  r.keys_in_map = timed->done + fill->done;
  if (map->size() != r.keys_in_map) {
    return Status::corruption(
        fmt::format("libpm map holds {} keys after {} inserts", map->size(), r.keys_in_map));
  }
  r.gets = cfg.keys;
  Result<double> gets = timed_gets(*map, r.keys_in_map, r.gets, "libpm");
  if (!gets.ok()) return gets.status();
  r.get_seconds = *gets;
  PM_TRY(measure_memory(box, *anon_before, &r));
  PM_TRY(check_heap(box));
  return r;
}

Result<VariantResult> run_pmemobj(const std::string& dir, const Config& cfg, Budgets budgets) {
  ScopedFile file(dir + "/hashmap-pmemobj.pool");
  const uint64_t nbuckets = pow2_at_least(cfg.keys);
  // Buckets of 16-byte PMEMoids, nodes with allocator headers, and slack.
  uint64_t pool = std::max<uint64_t>(PMEMOBJ_MIN_POOL, nbuckets * 16 + cfg.keys * 256 + 64 * kMiB);
  Result<std::unique_ptr<PmemobjHashMap>> map = PmemobjHashMap::create(file.path(), pool, nbuckets);
  if (!map.ok()) return map.status();
  Result<Phase> timed = pmemobj_inserts(**map, 0, cfg.keys, 1, budgets.insert_s);
  if (!timed.ok()) return timed.status();
  Result<Phase> fill = pmemobj_inserts(**map, timed->done, cfg.keys, kFillBatch, budgets.fill_s);
  if (!fill.ok()) return fill.status();
  VariantResult r;
  r.label = "libpmemobj, one transaction per insert";
  r.timed_inserts = timed->done;
  r.insert_seconds = timed->seconds;
  r.budget_s = budgets.insert_s;
  r.capped = timed->capped;
  r.keys_in_map = timed->done + fill->done;
  if ((*map)->size() != r.keys_in_map) {
    return Status::corruption(fmt::format("libpmemobj map holds {} keys after {} inserts",
                                          (*map)->size(), r.keys_in_map));
  }
  r.gets = cfg.keys;
  Result<double> gets = timed_gets(**map, r.keys_in_map, r.gets, "libpmemobj");
  if (!gets.ok()) return gets.status();
  r.get_seconds = *gets;
  return r;
}

}  // namespace pm::bench
