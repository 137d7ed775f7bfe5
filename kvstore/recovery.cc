#include "kvstore/recovery.h"

#include <algorithm>
#include <cstring>
#include <unordered_map>
#include <vector>

#include "kvstore/planted_bugs.h"

namespace kv {

namespace {

// A log's headers read a window at a time. The scan past a log's end peeks
// at every 8-byte position of a whole lap (after a crash, and in a new
// store): a read of its own per position cost a range check, a lock and a
// Status each, 1M of them per 8 MiB of log (6 s to create a store with
// 64 MiB of logs under ASan, a tenth of a second without; seconds after a
// crash for logs of hundreds of MiB).
class HeaderWindow {
 public:
  explicit HeaderWindow(const Log& log)
      : log_(log), buf_(static_cast<size_t>(std::min<uint64_t>(64 << 10, log.capacity()))) {}

  // The header at pos, when one claims to be there (its pos matches); not
  // validated.
  bool peek(uint64_t pos, RecordHeader* h) {
    if (!valid_ || pos < at_ || pos - at_ > buf_.size() - sizeof *h) {
      at_ = pos;
      valid_ = log_.read_bytes(pos, buf_.data(), buf_.size()).ok();
      if (!valid_) return false;
    }
    std::memcpy(h, buf_.data() + (pos - at_), sizeof *h);
    return h->pos == pos;
  }

 private:
  const Log& log_;
  std::vector<std::byte> buf_;
  uint64_t at_ = 0;
  bool valid_ = false;
};

// The session rule for one log (recovery.h).
class SessionRule {
 public:
  // `legacy`: a format-1 backend, which kept no boundaries; its records are
  // taken as they were before: sessions in order, none newer than the last.
  SessionRule(const BackendRoot& r, uint32_t log, bool legacy)
      : last_session_(static_cast<uint32_t>(r.session)),
        boundary_(legacy ? 0 : r.session_start[log]),
        legacy_(legacy || g_kv_planted_bugs.session_rule_without_boundary) {}

  bool accepts(uint64_t pos, uint32_t session) {
    if (g_kv_planted_bugs.no_session_check) return true;
    bool ok;
    if (legacy_) {
      ok = session >= seen_ && session <= last_session_;
    } else if (pos < boundary_) {
      ok = session >= seen_ && session < last_session_;
    } else {
      ok = session == last_session_;
    }
    if (ok) seen_ = session;
    return ok;
  }

 private:
  const uint32_t last_session_;  // the session that opened the store last
  const uint64_t boundary_;      // where it began writing this log
  const bool legacy_;
  uint32_t seen_ = 0;  // session of the previous record accepted
};

struct Newest {
  uint64_t seq = 0;
  LogRef ref = 0;
  bool remove = false;
  std::string value;
};

using NewestByKey = std::unordered_map<std::string, Newest>;

// Scans log i from its head; returns the end of the records it accepts.
uint64_t scan_log(const BackendRoot& r, bool legacy, uint32_t i, LogState* L,
                  const Limits& limits, NewestByKey* newest, Recovered* out) {
  return accepted_records(r, legacy, i, *L->log, limits, [&](const Record& rec, uint64_t pos) {
    out->next_seq = std::max(out->next_seq, rec.header.seq + 1);
    for (const Op& op : rec.ops) {
      Newest& n = (*newest)[std::string(op.key)];
      if (n.ref == 0 || rec.header.seq > n.seq) {
        n = {rec.header.seq, make_ref(i, pos), op.op == OpCode::kRemove, std::string(op.value)};
      }
    }
    out->records++;
  });
}

// Newest per key into the frontend, unless the backend already holds it.
Status install(Backend* be, Frontend* fe, const NewestByKey& newest) {
  for (const auto& [key, n] : newest) {
    const uint64_t h = hash_key(key);
    Result<Backend::Found> f = be->get(key, h, nullptr);
    if (!f.ok()) return f.status();
    if ((f->present || f->ghost) && f->seq >= n.seq && !g_kv_planted_bugs.replay_ignores_backend) {
      continue;
    }
    {
      Frontend::Locked lk(fe, h);
      lk.install(lk.find(key, h), h, n.seq, n.ref, key, n.value, n.remove);
    }
    if (fe->wants_growth()) fe->grow();
  }
  return Status();
}

}  // namespace

uint64_t accepted_records(const BackendRoot& r, bool legacy, uint32_t i, const Log& log,
                          const Limits& limits,
                          const std::function<void(const Record&, uint64_t pos)>& fn) {
  SessionRule rule(r, i, legacy);
  const uint64_t head = r.heads[i];
  uint64_t pos = head;
  Record rec;
  while (log.read(pos, limits, &rec) && rule.accepts(pos, rec.header.session) &&
         pos + rec.header.len - head <= r.log_bytes) {
    fn(rec, pos);
    pos += rec.header.len;
  }
  return pos;
}

Beyond look_beyond(const BackendRoot& r, uint32_t i, const Log& log, uint64_t end,
                   const Limits& limits,
                   const std::function<void(const Record&, uint64_t pos)>& fn) {
  Beyond b;
  const uint32_t session = static_cast<uint32_t>(r.session);
  if (log.is_close_mark(end, session)) return b;  // a clean end: nothing past it matters
  // Which session may have written where, as the session rule says, but
  // without its order between records (damage breaks the sequence).
  const bool legacy = r.version < 2;
  if (!legacy && end < r.session_start[i] && !g_kv_planted_bugs.torn_tail_before_session) {
    b.began = r.session_start[i];
  }
  auto plausible = [&](uint64_t pos, uint32_t s) {
    if (legacy) return s <= session;
    return pos < r.session_start[i] ? s < session : s == session;
  };
  Record rec;
  RecordHeader h;
  HeaderWindow window(log);
  for (uint64_t pos = end; pos + sizeof(RecordHeader) <= r.heads[i] + r.log_bytes; pos += 8) {
    if (!window.peek(pos, &h) || !plausible(pos, h.session)) continue;
    if (h.magic == kCloseMagic) {
      if (h.session == session && log.is_close_mark(pos, session)) {
        b.mark = pos;
        break;
      }
      continue;
    }
    if (!log.read(pos, limits, &rec)) continue;
    if (b.records++ == 0) b.first = pos;
    if (rec.in_order && b.in_order == 0 && !g_kv_planted_bugs.ignore_in_order_records) {
      b.in_order = pos;
    }
    if (fn) fn(rec, pos);
    pos += rec.header.len - 8;
  }
  return b;
}

std::string damaged_log_message(uint32_t i, uint64_t end, const Beyond& b) {
  const std::string why =
      b.mark != 0 ? "the store was closed cleanly with its records durable up to " +
                        std::to_string(b.mark)
      : b.in_order != 0
          ? "its records were made durable one after another, and a valid one lies at " +
                std::to_string(b.in_order)
          : "its last session began at " + std::to_string(b.began) +
                " once the records before that were durable";
  return "log " + std::to_string(i) + " is damaged at " + std::to_string(end) + ": " + why +
         ", and " + std::to_string(b.records) +
         " valid record(s) follow the damage that recovery cannot replay past it";
}

Result<Recovered> recover(pm::Container* c, Backend* be, Frontend* fe, LogWriter* logs,
                          Gleaner* gleaner, const Limits& limits, bool read_only) {
  BackendRoot* r = be->root();
  const bool legacy = be->legacy();
  Recovered out;
  NewestByKey newest;
  std::vector<uint64_t> ends(logs->size());
  for (uint32_t i = 0; i < logs->size(); i++) {
    ends[i] = scan_log(*r, legacy, i, logs->at(i), limits, &newest, &out);
    if (legacy || g_kv_planted_bugs.ignore_close_marks) continue;
    const Beyond b = look_beyond(*r, i, *logs->at(i)->log, ends[i], limits);
    if (b.damaged()) {
      return Status::corruption(
          c->usage().path + ": " + damaged_log_message(i, ends[i], b) +
          "; nothing was changed: copy what reads into a new store with `pm kv salvage`");
    }
  }
  // What recovery accepts must be durable before anything follows it: after
  // a process kill it may be only in the page cache (or CPU caches), and
  // later updates persist only their own ranges.
  if (!g_kv_planted_bugs.recovery_trusts_page_cache && !read_only) {
    for (uint32_t i = 0; i < logs->size(); i++) {
      if (ends[i] > r->heads[i]) PM_TRY(logs->at(i)->log->persist(r->heads[i], ends[i] - r->heads[i]));
    }
  }
  PM_TRY(install(be, fe, newest));
  out.next_seq = std::max(out.next_seq, r->seq_high);
  out.keys = newest.size();
  for (uint32_t i = 0; i < logs->size(); i++) {
    logs->restore(i, r->heads[i], ends[i]);
    gleaner->restore(i, r->heads[i]);
  }
  if (read_only) return out;
  // The new session and where it begins each log, durable before any of
  // its records is written.
  if (be->upgradable()) {  // an older format: a new root, and the ordered index
    Status u = be->upgrade();
    if (u.code() == pm::Code::kNoSpace && !legacy) {
      // No room for the index: the store opens without it (scans sort, as
      // for an older store opened read-only) and the next open tries again.
      PM_TRY(c->abort());
    } else {
      PM_TRY(u);
    }
    r = be->root();
  }
  out.session = static_cast<uint32_t>(r->session + 1);
  be->set(&r->session, uint64_t{out.session});
  for (uint32_t i = 0; i < logs->size(); i++) be->set(&r->session_start[i], ends[i]);
  PM_TRY(c->commit());
  return out;
}

}  // namespace kv
