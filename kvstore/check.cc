#include "kv/check.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <functional>
#include <unordered_map>
#include <unordered_set>

#include "kvstore/backend.h"
#include "kvstore/crl.h"
#include "kvstore/frontend.h"  // hash_key
#include "kvstore/recovery.h"
#include "kvstore/store_impl.h"
#include "libpm/publish.h"

namespace kv {

namespace {

// A key as a user can read it in a message.
std::string printable(std::string_view k) {
  std::string s;
  for (char ch : k.substr(0, 64)) s += (ch >= 32 && ch < 127) ? ch : '?';
  return k.size() > 64 ? s + "..." : s;
}

// Walks a backend that may be damaged: each link is checked before it is
// followed (inside the heap, lengths within the limits) and a cycle ends
// its walk. The root and its segments were checked by Backend::attach.
class Walker {
 public:
  Walker(pm::Container* c, const BackendRoot& r)
      : r_(r), lo_(reinterpret_cast<uintptr_t>(c->base())), hi_(lo_ + c->usage().heap_bytes) {}

  uint64_t buckets() const { return (kSegBuckets << r_.level) + r_.split; }

  // visit(entry, bucket) for every readable entry of every chain.
  void chains(const std::function<void(const BackendEntry*, uint64_t)>& visit,
              std::vector<std::string>* problems) {
    std::unordered_set<const BackendEntry*> seen;
    // (Version 1 roots have no flags.)
    const bool marked = r_.version >= 2 && (r_.flags & kChainEndsMarked) != 0;
    for (uint64_t b = 0; b < buckets(); b++) {
      const BackendEntry* e = r_.segs[b / kSegBuckets][b % kSegBuckets];
      for (; !is_chain_end(e); e = e->next) {
        if (!readable(e, "bucket " + std::to_string(b), problems)) break;
        if (!seen.insert(e).second) {
          problems->push_back("bucket " + std::to_string(b) +
                              ": its chain loops or runs into another chain");
          break;
        }
        visit(e, b);
      }
      if (is_chain_end(e) && e != (marked ? chain_end(b) : nullptr)) {
        problems->push_back("bucket " + std::to_string(b) + ": its chain ends in a damaged link (" +
                            (e == nullptr ? "zeroed" : "not its end mark") +
                            "); the entries after it are lost to reads");
      }
    }
  }

  // visit(ghost) for every readable entry of the ghost list.
  void ghost_list(const std::function<void(const BackendEntry*)>& visit,
                  std::vector<std::string>* problems) {
    std::unordered_set<const BackendEntry*> seen;
    for (const BackendEntry* g = r_.ghost_head; g != nullptr; g = entry_ghost_link(g)) {
      if (!readable(g, "the ghost list", problems)) return;
      if (!entry_is_ghost(g) || !seen.insert(g).second) {
        problems->push_back("the ghost list loops or holds a live entry");
        return;
      }
      visit(g);
    }
  }

 private:
  bool readable(const BackendEntry* e, const std::string& where,
                std::vector<std::string>* problems) const {
    std::string why = entry_problem(e, lo_, hi_, r_.max_key, r_.max_value);
    if (why.empty()) return true;
    problems->push_back(where + ": " + why + "; the rest of it is unreadable");
    return false;
  }

  const BackendRoot& r_;
  uintptr_t lo_, hi_;
};

Limits limits_of(const BackendRoot& r) { return {r.max_key, r.max_value, r.log_bytes / 4}; }

// Valid records past the end of what recovery accepts in log i.
// The table's entries; the live keys into *live.
void check_entries(pm::Container* c, const Backend& be, StoreCheck* out,
                   std::unordered_set<std::string>* live) {
  const BackendRoot& r = *be.root();
  Walker w(c, r);
  out->buckets = w.buckets();
  std::unordered_set<std::string> keys;
  const bool all_summed = be.all_checksummed();
  w.chains(
      [&](const BackendEntry* e, uint64_t bucket) {
        const std::string key(entry_key(e));
        const std::string name = "key '" + printable(key) + "'";
        Result<pm::BlockInfo> blk = c->find_block(e);
        if (!blk.ok() || blk->start != e || blk->size < entry_size(e)) {
          out->problems.push_back(name + ": its entry does not fit its heap block");
        }
        if (!entry_sum_ok(e) || (all_summed && !entry_has_sum(e))) {
          out->problems.push_back(name + ": its entry fails its checksum");
        }
        if (bucket_for(r, hash_key(key)) != bucket) {
          out->problems.push_back(name + ": in bucket " + std::to_string(bucket) +
                                  ", which is not its hash's");
        }
        if (e->seq >= r.seq_high) {
          out->problems.push_back(name + ": sequence number " + std::to_string(e->seq) +
                                  " is not below the root's " + std::to_string(r.seq_high));
        }
        if (!keys.insert(key).second) out->problems.push_back(name + ": in the table twice");
        (entry_is_ghost(e) ? out->ghosts : out->keys)++;
        if (!entry_is_ghost(e)) live->insert(key);
      },
      &out->problems);
  uint64_t listed = 0;
  w.ghost_list([&](const BackendEntry*) { listed++; }, &out->problems);
  if (out->keys != r.count) {
    out->problems.push_back("the root counts " + std::to_string(r.count) + " keys; the table holds " +
                            std::to_string(out->keys));
  }
  if (listed != r.ghosts) {
    out->problems.push_back("the root counts " + std::to_string(r.ghosts) +
                            " ghosts; the ghost list holds " + std::to_string(listed));
  }
}

// The ordered index: its nodes, and exactly the table's live keys.
void check_index(const Backend& be, const std::unordered_set<std::string>& live,
                 StoreCheck* out) {
  if (!be.index_status().ok()) {
    out->problems.push_back(be.index_status().message());
    return;
  }
  if (be.index() == nullptr) return;  // made without one, or older: upgraded at the next open
  std::unordered_set<std::string> indexed;
  int shown = 0;
  std::vector<std::string> problems;
  be.index()->verify(
      [&](std::string_view k) {
        indexed.emplace(k);
        if (live.count(std::string(k)) == 0 && shown++ < 10) {
          out->problems.push_back("index: key '" + printable(k) + "' is not live in the table");
        }
      },
      &problems);
  for (std::string& p : problems) out->problems.push_back(std::move(p));
  if (!problems.empty()) return;  // the walk stopped early: what it missed is not missing
  for (const std::string& k : live) {
    if (indexed.count(k) == 0 && shown++ < 10) {
      out->problems.push_back("key '" + printable(k) + "': live in the table, not in the index");
    }
  }
}

void check_logs(pm::Container* c, const Backend& be, StoreCheck* out) {
  const BackendRoot& r = *be.root();
  for (uint32_t i = 0; i < r.nlogs; i++) {
    Log log(&c->raw(), i, uint64_t{i} * r.log_bytes, r.log_bytes);
    const uint64_t end = accepted_records(r, be.legacy(), i, log, limits_of(r),
                                          [&](const Record&, uint64_t) { out->log_records++; });
    const Beyond b = look_beyond(r, i, log, end, limits_of(r));
    if (b.damaged()) {
      out->problems.push_back(damaged_log_message(i, end, b) + " (`pm kv salvage` copies them)");
    } else if (b.records != 0) {
      out->notes.push_back("log " + std::to_string(i) + ": its records end at " +
                           std::to_string(end) + "; " + std::to_string(b.records) +
                           " valid record(s) from " + std::to_string(b.first) +
                           " on are not replayed (updates not synced before a crash)");
    }
  }
}

}  // namespace

Result<StoreCheck> check_store(pm::Container* c) {
  Result<std::unique_ptr<Backend>> be = Backend::attach(c);
  StoreCheck out;
  if (!be.ok()) {
    if (be.status().code() != pm::Code::kCorruption) return be.status();
    out.problems.push_back(be.status().message());
    return out;
  }
  std::unordered_set<std::string> live;
  check_entries(c, **be, &out, &live);
  // Compared with the live keys only when the table read whole (a damaged
  // chain hides keys the index rightly holds).
  if (out.problems.empty()) check_index(**be, live, &out);
  check_logs(c, **be, &out);
  return out;
}

// ---------------------------------------------------------------- salvage

namespace {

struct Found {
  uint64_t seq;
  bool present;
  std::string value;
};

// Log operations recovery would replay, oldest first, and those after
// damage; the damaged records themselves go to `problems` (their updates
// are lost: their keys may read older values).
std::vector<std::pair<std::string, Found>> log_ops(pm::Container* c, const Backend& be,
                                                   std::vector<std::string>* problems) {
  const BackendRoot& r = *be.root();
  std::vector<std::pair<std::string, Found>> ops;
  for (uint32_t i = 0; i < r.nlogs; i++) {
    Log log(&c->raw(), i, uint64_t{i} * r.log_bytes, r.log_bytes);
    auto into = [](std::vector<std::pair<std::string, Found>>* to) {
      return [to](const Record& rec, uint64_t) {
        for (const Op& op : rec.ops) {
          to->push_back({std::string(op.key),
                         {rec.header.seq, op.op == OpCode::kPut, std::string(op.value)}});
        }
      };
    };
    const uint64_t end = accepted_records(r, be.legacy(), i, log, limits_of(r), into(&ops));
    // Past proven damage: the records that follow it (recovery refuses to
    // open such a store).
    std::vector<std::pair<std::string, Found>> past;
    const Beyond b = look_beyond(r, i, log, end, limits_of(r), into(&past));
    if (b.damaged()) {
      ops.insert(ops.end(), past.begin(), past.end());
      problems->push_back(damaged_log_message(i, end, b) +
                          "; the updates of the damaged record(s) are lost: their keys keep "
                          "older values");
    }
  }
  std::stable_sort(ops.begin(), ops.end(),
                   [](const auto& a, const auto& b) { return a.second.seq < b.second.seq; });
  return ops;
}

StoreOptions options_like(const BackendRoot& r) {
  StoreOptions o;
  o.logs = static_cast<int>(r.nlogs);
  o.log_bytes = r.log_bytes;
  o.max_key_bytes = r.max_key;
  o.max_value_bytes = r.max_value;
  o.ordered = r.version < 3 || r.index != 0;  // as it was made
  o.background = false;
  o.durability = Durability::kAsync;  // one sync at the end
  return o;
}

}  // namespace

Result<SalvageReport> salvage(const std::string& from, const std::string& to) {
  struct stat st;
  if (::stat(to.c_str(), &st) == 0) {
    return Status::invalid_argument(to + " exists; salvage writes a new store");
  }
  pm::Options co;
  co.tracker = pm::TrackerKind::kHints;  // nothing is written
  // Read-only: `from` is left as it is (a commit its last session left
  // pending is applied in this process's memory only).
  co.read_only = true;
  Result<std::unique_ptr<pm::Container>> c = pm::Container::open(from, co);
  if (!c.ok() && !c.status().is_corruption()) return c.status().with_context("salvage " + from);
  if (!c.ok()) {
    return Status::corruption("salvage " + from + ": it does not open as a container (" +
                              c.status().message() + "); nothing can be read by key");
  }
  Result<std::unique_ptr<Backend>> be = Backend::attach(c->get());
  if (!be.ok()) return be.status().with_context("salvage " + from);
  const BackendRoot& r = *(*be)->root();
  SalvageReport rep;
  // Built under another name and renamed once complete: a salvage stopped
  // half way left a store at `to` that looked finished.
  const std::string tmp = to + ".salvaging";
  if (::stat(tmp.c_str(), &st) == 0) {
    return Status::invalid_argument(tmp + " exists: a salvage that was stopped left it; remove "
                                    "it, then salvage again");
  }
  StoreOptions so = options_like(r);
  // The new heap starts at about what the source holds, not the default
  // 64 MiB (it grows as needed): a salvage onto a small disk failed for
  // room the copy never needed (a user trial: 4 MiB store, 40 MiB tmpfs).
  const uint64_t used = (*c)->info().used_bytes;
  so.initial_heap_bytes =
      std::clamp<uint64_t>((used + (1 << 20)) & ~uint64_t{(1 << 20) - 1}, 1 << 20,
                           so.initial_heap_bytes);
  Result<std::unique_ptr<Store>> out = Store::open(tmp, so);
  if (!out.ok()) return out.status().with_context("salvage into " + to);
  const std::vector<std::pair<std::string, Found>> ops = log_ops(c->get(), **be, &rep.problems);
  // Numbers go on past the source's (a damaged one's are capped: the
  // counter must not wrap).
  uint64_t high = r.seq_high;
  for (const auto& [key, f] : ops) high = std::max(high, f.seq);
  static_cast<StoreImpl*>(out->get())->continue_numbering(std::min(high, uint64_t{1} << 62) + 1);
  // The backend first (each key once, as its entry says), then the log
  // records newer than what the backend holds for their key.
  std::unordered_map<std::string, uint64_t> backend_seq;
  Status failed;
  const bool all_summed = (*be)->all_checksummed();
  Walker w(c->get(), r);
  w.chains(
      [&](const BackendEntry* e, uint64_t) {
        if (!entry_sum_ok(e) || (all_summed && !entry_has_sum(e))) {
          rep.damaged_entries++;
          rep.problems.push_back("key '" + printable(entry_key(e)) + "': damaged, not copied");
          return;
        }
        backend_seq[std::string(entry_key(e))] = e->seq;
        if (entry_is_ghost(e) || !failed.ok()) return;
        failed = (*out)->put(entry_key(e), entry_value(e));
        rep.keys++;
      },
      &rep.problems);
  for (const auto& [key, f] : ops) {
    auto it = backend_seq.find(key);
    if ((it != backend_seq.end() && it->second >= f.seq) || !failed.ok()) continue;
    Result<bool> had = (*out)->contains(key);
    if (f.present) {
      failed = (*out)->put(key, f.value);
      rep.keys += had.ok() && !*had;
      rep.from_logs++;
    } else if (had.ok() && *had) {
      failed = (*out)->remove(key);
      rep.keys--;
    }
  }
  if (failed.ok()) failed = (*out)->checkpoint();
  out->reset();
  if (failed.ok()) failed = pm::publish(tmp, to);
  if (!failed.ok()) {
    ::unlink(tmp.c_str());
    return failed.with_context("salvage into " + to);
  }
  return rep;
}

}  // namespace kv
