#include "bench/container/working_set.h"

#include <fmt/format.h>
#include <libpmemobj.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <vector>

#include "bench/common/scoped_file.h"
#include "bench/common/workload.h"
#include "pm/container.h"

namespace pm::bench {

namespace {

constexpr uint64_t kPage = 4096;

uint64_t sum_words(const uint64_t* w, uint64_t n) {
  uint64_t sum = 0;
  for (uint64_t i = 0; i < n; i++) sum += w[i];
  return sum;
}

Status check_sum(const char* engine, uint64_t sum, uint64_t updates) {
  if (sum == updates) return Status();
  return Status::corruption(fmt::format(
      "{}: the working set's counters sum to {} after {} committed updates", engine, sum, updates));
}

// One timed cell: rounds of `batch` updates and a commit until the budget
// is spent (at least one round).
struct Timed {
  uint64_t updates = 0;
  double seconds = 0;
  double commit_seconds = 0;
  uint64_t commits = 0;
  double rate() const { return seconds > 0 ? double(updates) / seconds : 0; }
  double us_per_commit() const { return commits ? commit_seconds * 1e6 / double(commits) : 0; }
};

// The working set in a libpm container, one object, the root.
class LibpmSet {
 public:
  static Result<std::unique_ptr<LibpmSet>> create(const std::string& path, TrackerKind kind,
                                                  uint64_t pages) {
    Options o;
    o.initial_size = pages * kPage + (16ull << 20);
    o.max_size = std::max<uint64_t>(1ull << 30, 2 * o.initial_size);
    o.tracker = kind;
    Result<std::unique_ptr<Container>> c = Container::create(path, o);
    if (!c.ok()) return c.status();
    Result<void*> set = (*c)->alloc(pages * kPage);
    if (!set.ok()) return set.status();
    std::memset(*set, 0, pages * kPage);
    PM_TRY((*c)->set_root(*set));
    PM_TRY((*c)->commit());
    return std::unique_ptr<LibpmSet>(
        new LibpmSet(std::move(*c), static_cast<uint64_t*>(*set), pages * kPage / 8));
  }

  Result<Timed> run(uint64_t batch, double budget_s, Rng* rng) {
    const bool hints = c_->usage().tracker == tracker_name(TrackerKind::kHints);
    Timed cell;
    const uint64_t t0 = now_ns();
    const uint64_t deadline = t0 + static_cast<uint64_t>(budget_s * 1e9);
    uint64_t t = t0;
    do {
      for (uint64_t i = 0; i < batch; i++) {
        uint64_t* w = &words_[rng->below(n_)];
        if (hints) c_->will_write(w, sizeof *w);
        ++*w;
      }
      const uint64_t tc = now_ns();
      PM_TRY(c_->commit());
      t = now_ns();
      cell.commit_seconds += double(t - tc) / 1e9;
      cell.commits++;
      cell.updates += batch;
    } while (t < deadline);
    cell.seconds = double(t - t0) / 1e9;
    committed_ += cell.updates;
    return cell;
  }

  std::string tracker() const { return c_->usage().tracker; }

  // Reopens the file and checks that every committed update is there.
  Status verify(const std::string& path) {
    c_.reset();
    Result<std::unique_ptr<Container>> c = Container::open(path, Options());
    if (!c.ok()) return c.status();
    return check_sum("libpm", sum_words((*c)->root<uint64_t>(), n_), committed_);
  }

 private:
  LibpmSet(std::unique_ptr<Container> c, uint64_t* words, uint64_t n)
      : c_(std::move(c)), words_(words), n_(n) {}

  std::unique_ptr<Container> c_;
  uint64_t* words_;
  uint64_t n_;
  uint64_t committed_ = 0;
};

// The same set in a libpmemobj pool (its root object), a transaction per
// update that adds the word's range to its undo log.
class PmemobjSet {
 public:
  static Result<std::unique_ptr<PmemobjSet>> create(const std::string& path, uint64_t pages) {
    PMEMobjpool* pop = pmemobj_create(path.c_str(), "pm-bench-working-set",
                                      pages * kPage + (32ull << 20), 0600);
    if (pop == nullptr) {
      return Status::io_error(fmt::format("pmemobj_create {}: {}", path, pmemobj_errormsg()));
    }
    PMEMoid root = pmemobj_root(pop, pages * kPage);  // zeroed
    if (OID_IS_NULL(root)) {
      pmemobj_close(pop);
      return Status::io_error(fmt::format("pmemobj_root: {}", pmemobj_errormsg()));
    }
    return std::unique_ptr<PmemobjSet>(
        new PmemobjSet(pop, static_cast<uint64_t*>(pmemobj_direct(root)), pages * kPage / 8));
  }
  ~PmemobjSet() { pmemobj_close(pop_); }

  Result<Timed> run(double budget_s, Rng* rng) {
    Timed cell;
    const uint64_t t0 = now_ns();
    const uint64_t deadline = t0 + static_cast<uint64_t>(budget_s * 1e9);
    uint64_t t = t0;
    do {
      for (int i = 0; i < 64; i++) PM_TRY(update(&words_[rng->below(n_)]));
      cell.updates += 64;
      t = now_ns();
    } while (t < deadline);
    cell.seconds = double(t - t0) / 1e9;
    cell.commits = cell.updates;
    committed_ += cell.updates;
    return cell;
  }

  Status verify() const { return check_sum("libpmemobj", sum_words(words_, n_), committed_); }

 private:
  PmemobjSet(PMEMobjpool* pop, uint64_t* words, uint64_t n) : pop_(pop), words_(words), n_(n) {}

  Status update(uint64_t* w) {
    int err = pmemobj_tx_begin(pop_, nullptr, TX_PARAM_NONE);
    if (err == 0) {
      err = pmemobj_tx_add_range_direct(w, sizeof *w);
      if (err == 0) ++*w;
      if (pmemobj_tx_stage() == TX_STAGE_WORK) {
        if (err == 0) {
          pmemobj_tx_commit();
        } else {
          pmemobj_tx_abort(err);
        }
      }
    }
    const int end = pmemobj_tx_end();
    if (end == 0 && err == 0) return Status();
    return Status::io_error(fmt::format("pmemobj transaction aborted: {} ({})",
                                        std::strerror(end ? end : err), pmemobj_errormsg()));
  }

  PMEMobjpool* pop_;
  uint64_t* words_;
  uint64_t n_;
  uint64_t committed_ = 0;
};

// Per libpm tracker: a cell per batch size, each repeated.
struct Curve {
  TrackerKind kind;
  std::string tracker;  // as resolved (kAuto: the default here)
  std::vector<std::vector<Timed>> cells;  // [batch][repeat]
};

Timed median_cell(std::vector<Timed> cells) {
  std::sort(cells.begin(), cells.end(), [](const Timed& a, const Timed& b) { return a.rate() < b.rate(); });
  return cells[cells.size() / 2];
}

Table make_table(const std::vector<Curve>& curves, const Timed& base, const Config& cfg) {
  Table t;
  t.title = fmt::format(
      "(v) working set: an 8-byte counter incremented at a random place in {} pages ({:.1f} MiB); "
      "libpm commits every N updates, libpmemobj runs a transaction per update",
      cfg.working_set_pages, double(cfg.working_set_pages * kPage) / (1 << 20));
  t.columns = {{"updates per commit", "updates_per_commit", Format::kCount}};
  for (const Curve& c : curves) {
    t.columns.push_back({"libpm " + c.tracker + " updates/s", c.tracker + "_updates_per_s",
                         Format::kRate});
    t.columns.push_back({"us/commit", c.tracker + "_us_per_commit", Format::kMicros});
    t.columns.push_back({"vs pmemobj", c.tracker + "_vs_pmemobj", Format::kRatio});
  }
  for (size_t b = 0; b < cfg.working_set_batches.size(); b++) {
    std::vector<Cell> row = {static_cast<int64_t>(cfg.working_set_batches[b])};
    for (const Curve& c : curves) {
      const Timed m = median_cell(c.cells[b]);
      row.insert(row.end(), {m.rate(), m.us_per_commit(), ratio(m.rate(), base.rate())});
    }
    t.add_row(std::move(row));
  }
  t.notes.push_back(fmt::format(
      "libpmemobj, transaction per update: {:.0f} updates/s ({:.2f} us each)", base.rate(),
      base.rate() > 0 ? 1e6 / base.rate() : 0.0));
  t.notes.push_back(fmt::format(
      "each cell runs for {:g} s (whole batches), median of {} interleaved repeats; the hints "
      "tracker is told each 8-byte range (will_write), the default one faults once per page "
      "and commit; afterwards the counters must sum to the updates made (libpm: after reopen)",
      cfg.working_set_cell_s, cfg.working_set_repeats));
  return t;
}

}  // namespace

Result<SuiteResult> run_working_set(const DirInfo& dir, const Config& cfg,
                                    const Progress& progress) {
  ScopedFile base_file(fmt::format("{}/working-set-pmemobj.pool", dir.dir));
  Result<std::unique_ptr<PmemobjSet>> base = PmemobjSet::create(base_file.path(), cfg.working_set_pages);
  if (!base.ok()) return base.status().with_context("working set, libpmemobj");

  std::vector<Curve> curves;
  std::vector<std::unique_ptr<ScopedFile>> files;
  std::vector<std::unique_ptr<LibpmSet>> sets;
  for (TrackerKind kind : {TrackerKind::kAuto, TrackerKind::kHints}) {
    files.push_back(std::make_unique<ScopedFile>(
        fmt::format("{}/working-set-{}.pm", dir.dir, tracker_name(kind))));
    Result<std::unique_ptr<LibpmSet>> s =
        LibpmSet::create(files.back()->path(), kind, cfg.working_set_pages);
    if (!s.ok()) return s.status().with_context("working set, libpm");
    curves.push_back({kind, (*s)->tracker(), std::vector<std::vector<Timed>>(cfg.working_set_batches.size())});
    sets.push_back(std::move(*s));
  }

  // Warm up (pages populated and private), then repeats interleaved so that
  // machine noise lands on every engine alike.
  Rng rng(42);
  std::vector<Timed> base_cells;
  if (Result<Timed> w = (*base)->run(cfg.working_set_cell_s / 4, &rng); !w.ok()) return w.status();
  for (auto& s : sets) {
    if (Result<Timed> w = s->run(cfg.working_set_batches.back(), 0, &rng); !w.ok()) return w.status();
  }
  for (int r = 0; r < cfg.working_set_repeats; r++) {
    progress.step(fmt::format("working set, repeat {} of {}, in {}", r + 1, cfg.working_set_repeats,
                              dir.dir));
    Result<Timed> b = (*base)->run(cfg.working_set_cell_s, &rng);
    if (!b.ok()) return b.status().with_context("working set, libpmemobj");
    base_cells.push_back(*b);
    for (size_t i = 0; i < sets.size(); i++) {
      for (size_t k = 0; k < cfg.working_set_batches.size(); k++) {
        Result<Timed> c = sets[i]->run(cfg.working_set_batches[k], cfg.working_set_cell_s, &rng);
        if (!c.ok()) return c.status().with_context("working set, libpm " + curves[i].tracker);
        curves[i].cells[k].push_back(*c);
      }
    }
  }
  PM_TRY((*base)->verify());
  for (size_t i = 0; i < sets.size(); i++) PM_TRY(sets[i]->verify(files[i]->path()));

  const Timed base_median = median_cell(base_cells);
  SuiteResult res;
  res.tables.push_back(make_table(curves, base_median, cfg));
  Target t = Target::at_least_of(
      fmt::format("working set of {} pages, {} updates per commit (default tracker, {}) vs "
                  "libpmemobj, transaction per update",
                  cfg.working_set_pages, cfg.working_set_batches.back(), curves[0].tracker),
      195, "x");
  Cell c = ratio(median_cell(curves[0].cells.back()).rate(), base_median.rate());
  t.available = std::holds_alternative<double>(c);
  if (t.available) t.measured = std::get<double>(c);
  if (!dir.is_pmem) t.not_applicable = "goal is for (emulated) pmem; this is msync";
  res.targets.push_back(t);
  return res;
}

}  // namespace pm::bench
