// pm kv put | get | del | ls | load | stats: a kv::Store from the shell.
//
// Every invocation opens the store (replaying its logs) and closes it, so
// what one invocation wrote the next one reads. Keys and values are bytes:
// get writes the value as it is, put reads it from stdin unchanged.
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <thread>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <istream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "bench/kv/kv_stats_rows.h"
#include "kv/check.h"
#include "kv/store.h"
#include "pm/command.h"
#include "pm/json_bytes.h"

namespace pm::cli {

namespace {

using Json = nlohmann::json;

// Flags every kv subcommand takes. The creation ones are stored in the
// container when it is created and ignored by later opens.
struct StoreArgs {
  std::string path;
  int logs = kv::StoreOptions().logs;
  uint64_t log_mib = kv::StoreOptions().log_bytes >> 20;
  uint32_t max_key = kv::StoreOptions().max_key_bytes;
  uint32_t max_value = kv::StoreOptions().max_value_bytes;
  uint64_t heap = kv::StoreOptions().initial_heap_bytes;
  bool unordered = false;
  bool async = false;
  bool no_create = false;
  double wait_seconds = 10;  // for a store another process has open
};

// How a command uses the store: only put and load create a missing one; the
// others say so instead of leaving an empty store behind.
enum class Access { kRead, kWrite, kCreate };

void add_creation_args(CLI::App* app, StoreArgs* a) {
  const char* kCreation = "Creation (used only when the store is created)";
  app->add_option("--logs", a->logs, "number of persistent logs")
      ->capture_default_str()
      ->check(CLI::Range(1, kv::StoreOptions::kMaxLogs))
      ->group(kCreation);
  app->add_option("--log-mb", a->log_mib, "size of each log in MiB")
      ->capture_default_str()
      ->check(CLI::Range(uint64_t{1}, uint64_t{16} << 10))
      ->group(kCreation);
  app->add_option("--max-key", a->max_key, "longest key in bytes")
      ->capture_default_str()
      ->check(CLI::Range(1u, 65535u))
      ->group(kCreation);
  app->add_option("--max-value", a->max_value,
                  "longest value in bytes (with the longest key and 128 bytes, at most a quarter "
                  "of a log)")
      ->capture_default_str()
      ->group(kCreation);
  add_size_option(app, "--heap,--size", a->heap,
                  "heap made at create (it grows as needed; a small one fits a small disk)")
      ->capture_default_str()
      ->check(kHeapSize)
      ->group(kCreation);
  app->add_flag("--unordered", a->unordered,
                "no ordered index: new keys cost less to apply, every ls reads and sorts all keys")
      ->group(kCreation);
  app->add_flag("--no-create", a->no_create, "fail instead of creating a missing store");
  // The store's rules across options, as usage errors (exit 2) naming the
  // options, before anything is opened (they used to exit 1 from the open).
  // (Not for a store that exists: they are ignored there.)
  app->parse_complete_callback([app, a] {
    const auto given = [app](const char* name) { return app->get_option(name)->count() > 0; };
    if (!given("--logs") && !given("--log-mb") && !given("--max-value") && !given("--max-key")) {
      return;
    }
    if (struct stat st; ::stat(a->path.c_str(), &st) == 0) return;
    if (a->log_mib > (uint64_t{16} << 10) / static_cast<uint64_t>(a->logs)) {
      throw CLI::ValidationError("--logs, --log-mb", std::to_string(a->logs) + " logs of " +
                                                         std::to_string(a->log_mib) +
                                                         " MiB: the logs may hold at most 16 GiB");
    }
    const int64_t most = static_cast<int64_t>((a->log_mib << 20) / 4) - a->max_key - 128;
    if (static_cast<int64_t>(a->max_value) > most) {
      throw CLI::ValidationError(
          "--max-value, --log-mb",
          "the longest value (" + std::to_string(a->max_value) + ") with the longest key (" +
              std::to_string(a->max_key) + ") and 128 bytes must fit a quarter of a log (" +
              std::to_string(a->log_mib) + " MiB), so at most " +
              std::to_string(std::max<int64_t>(most, 0)) + " here");
    }
  });
}

// The options of a command that uses the store as `access` says: creation
// options only where a store may be created, --async only where it writes.
void add_store_args(CLI::App* app, StoreArgs* a, Access access) {
  app->add_option("store", a->path, "store file (a libpm container)")->required()->check(kPath);
  if (access == Access::kCreate) add_creation_args(app, a);
  if (access != Access::kRead) {
    app->add_flag("--async", a->async,
                  "a write returns before it is durable; the command syncs before it exits");
  }
  app->add_option("--wait", a->wait_seconds,
                  access == Access::kRead
                      ? "seconds to wait for a store another process has open for writing "
                        "(0: fail at once; readers share it)"
                      : "seconds to wait for a store another process has open (0: fail at once)")
      ->capture_default_str()
      ->check(kFinite & CLI::Range(0.0, 86400.0));
}

// False only when the path is known to be missing; other stat errors are
// left for the open to report.
bool file_exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 || errno != ENOENT;
}

Result<std::unique_ptr<kv::Store>> open_store(const StoreArgs& a, Access access) {
  const bool creates = access == Access::kCreate;
  kv::StoreOptions o;
  o.logs = a.logs;
  o.log_bytes = a.log_mib << 20;
  o.max_key_bytes = a.max_key;
  o.max_value_bytes = a.max_value;
  o.initial_heap_bytes = a.heap;
  o.ordered = !a.unordered;
  o.durability = a.async ? kv::Durability::kAsync : kv::Durability::kSync;
  o.create_if_missing = creates && !a.no_create;
  o.read_only = access == Access::kRead && open_read_only(a.path);
  // A command that reads starts no gleaning and no epochs: what it shows
  // then does not depend on whether a background commit met damage first
  // (a user trial: one flipped byte of the heap's page map made `pm kv ls`
  // list every key or fail with "store stopped", by turns).
  o.background = access != Access::kRead;
  if (!o.create_if_missing && !file_exists(a.path)) {
    return Status::not_found(
        creates
            ? fmt::format("{}: no such store (--no-create is given)", a.path)
            : fmt::format("{}: no such store; 'pm kv put' or 'pm kv load' creates one", a.path));
  }
  // Another pm command (or a mount) holding the store: wait for it, as two
  // `pm kv put` in a row from two shells expect, then report the holder.
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration<double>(a.wait_seconds);
  auto pause = std::chrono::milliseconds(2);
  for (;;) {
    Result<std::unique_ptr<kv::Store>> s = kv::Store::open(a.path, o);
    if (s.ok() || !s.status().is_busy()) return s;
    // Held by readers only (a program that opened it read-only): a command
    // that reads shares the file with them.
    if (access == Access::kRead && !o.read_only) {
      kv::StoreOptions shared = o;
      shared.read_only = true;
      Result<std::unique_ptr<kv::Store>> r = kv::Store::open(a.path, shared);
      if (r.ok() || !r.status().is_busy()) return r;
    }
    if (std::chrono::steady_clock::now() + pause > deadline) {
      return a.wait_seconds == 0
                 ? s.status()
                 : s.status().with_context(fmt::format("waited {:g} s (--wait)", a.wait_seconds));
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(100));
  }
}

// A key as messages show it: quoted, non-printable bytes escaped, long keys cut.
std::string shown(std::string_view s) {
  constexpr size_t kMax = 40;
  std::string out = "'";
  for (size_t i = 0; i < s.size() && i < kMax; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7f && c != '\'' && c != '\\') {
      out += static_cast<char>(c);
    } else {
      out += fmt::format("\\x{:02x}", c);
    }
  }
  out += s.size() > kMax ? fmt::format("...' ({} bytes)", s.size()) : "'";
  return out;
}


Status write_out(std::string_view bytes) {
  if (std::fwrite(bytes.data(), 1, bytes.size(), stdout) != bytes.size() ||
      std::fflush(stdout) != 0) {
    return Status::from_errno("write stdout", errno);
  }
  return Status();
}

Status read_stdin(std::string* out) {
  char buf[1 << 16];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, stdin)) > 0) out->append(buf, n);
  if (std::ferror(stdin)) return Status::from_errno("read stdin", errno);
  return Status();
}

// ---------------------------------------------------------------- put get del

struct KeyArgs {
  StoreArgs store;
  std::string key, value;
  CLI::Option* value_opt = nullptr;
};

void add_key_arg(CLI::App* app, KeyArgs* a, Access access) {
  add_store_args(app, &a->store, access);
  app->add_option("key", a->key, "key")->required();
}

// With --json a change reports itself: {"store", "key", "done"}.
void print_done(const KeyArgs& a, std::string_view done, bool json) {
  if (!json) return;
  Json obj = {{"store", a.store.path}, {"done", done}};
  put_bytes(obj, "key", a.key);
  fmt::print("{}\n", json_text(obj));
}

// Sizes over the limits a new store would be made with: refused before it
// is made, so that a put or load that fails on them leaves no store behind
// (with limits fixed for good). An existing store checks its own.
Status check_new_store_limits(const StoreArgs& a, std::string_view where, size_t key,
                              size_t value) {
  if (key > a.max_key) {
    return Status::invalid_argument(fmt::format("{}: key of {} bytes is over the limit of {} "
                                                "(--max-key)", where, key, a.max_key));
  }
  if (value > a.max_value) {
    return Status::invalid_argument(fmt::format("{}: value of {} bytes is over the limit of {} "
                                                "(--max-value)", where, value, a.max_value));
  }
  return Status();
}

// After a put or del: durable before the command exits (with --async too),
// and applied. A store used by one short command after another otherwise
// replayed, and applied again, everything the earlier commands had logged,
// and committed none of it: the heap's growth for it stayed in the file
// each time (a user trial: 31 puts of 64 KiB, one command each, made a
// 22 MiB file of a 1 MiB heap). A checkpoint syncs the logs before it
// commits; one that fails (a full disk) leaves the update to a sync alone,
// durable in the logs and applied by a later open.
Status finish_update(kv::Store& s) {
  if (s.checkpoint().ok()) return Status();
  return s.sync();
}

Status run_put(const KeyArgs& a, bool json) {
  // Before a store is made for it (no limit allows an empty key).
  if (a.key.empty()) return Status::invalid_argument("put into " + a.store.path + ": empty key");
  // Read stdin before opening: the store stays locked while it is open.
  std::string value;
  if (a.value_opt->count() == 0 || a.value == "-") {
    PM_TRY(read_stdin(&value));
  } else {
    value = a.value;
  }
  if (!file_exists(a.store.path)) {
    PM_TRY(check_new_store_limits(a.store, "put into " + a.store.path, a.key.size(),
                                  value.size()));
  }
  Result<std::unique_ptr<kv::Store>> s = open_store(a.store, Access::kCreate);
  if (!s.ok()) return s.status();
  Status st = (*s)->put(a.key, value);
  if (!st.ok()) return st.with_context(fmt::format("put {} into {}", shown(a.key), a.store.path));
  PM_TRY(finish_update(**s));
  print_done(a, "put", json);
  return Status();
}

Status run_get(const KeyArgs& a, bool json) {
  Result<std::unique_ptr<kv::Store>> s = open_store(a.store, Access::kRead);
  if (!s.ok()) return s.status();
  std::string value;
  Status st = (*s)->get(a.key, &value);
  if (st.is_not_found()) {
    return Status::not_found(fmt::format("{}: no key {}", a.store.path, shown(a.key)));
  }
  if (!st.ok()) return st.with_context(fmt::format("get {} from {}", shown(a.key), a.store.path));
  if (json) {
    Json obj = Json::object();
    put_bytes(obj, "key", a.key);
    put_bytes(obj, "value", value);
    return write_out(json_text(obj) + "\n");
  }
  return write_out(value);
}

Status run_del(const KeyArgs& a, bool json) {
  Result<std::unique_ptr<kv::Store>> s = open_store(a.store, Access::kWrite);
  if (!s.ok()) return s.status();
  Status st = (*s)->remove(a.key);
  if (st.is_not_found()) {
    return Status::not_found(fmt::format("{}: no key {}", a.store.path, shown(a.key)));
  }
  if (!st.ok()) return st.with_context(fmt::format("del {} from {}", shown(a.key), a.store.path));
  PM_TRY(finish_update(**s));
  print_done(a, "removed", json);
  return Status();
}

// ---------------------------------------------------------------- ls

struct LsArgs {
  StoreArgs store;
  std::string prefix, start, end;
  uint64_t limit = 0;
  bool values = false;
  bool all = false;
};

// Rows as they come from the store's ordered scan (nothing is held but the
// output buffer): lines, or the elements of one JSON array laid out as
// json_text() would lay out the whole array.
class LsPrinter {
 public:
  LsPrinter(bool json, bool values) : json_(json), values_(values) {}
  Status row(std::string_view k, std::string_view v) {
    if (json_) {
      Json obj = Json::object();
      put_bytes(obj, "key", k);
      if (values_) put_bytes(obj, "value", v);
      out_ += rows_ == 0 ? "[\n" : ",\n";
      const std::string text = json_text(obj);
      for (size_t at = 0; at < text.size();) {  // each line two spaces in
        const size_t nl = std::min(text.find('\n', at), text.size());
        (out_ += "  ").append(text, at, nl - at);
        if (nl < text.size()) out_ += '\n';
        at = nl + 1;
      }
    } else {
      out_ += k;
      if (values_) (out_ += '\t') += v;
      out_ += '\n';
    }
    rows_++;
    return out_.size() < (64 << 10) ? Status() : flush();
  }
  Status finish() {
    if (json_) out_ += rows_ == 0 ? "[]\n" : "\n]\n";
    return flush();
  }
  // A listing that failed part way: the lines listed are written. In JSON,
  // with no row listed nothing is (the error is the whole report); else
  // the array is closed, so that stdout stays one valid document whatever
  // was buffered, and true is returned.
  bool abandon() {
    if (!json_) {
      (void)flush();
      return false;
    }
    if (rows_ == 0) {
      out_.clear();
      return false;
    }
    (void)finish();
    return true;
  }

 private:
  Status flush() {
    Status s = write_out(out_);
    out_.clear();
    return s;
  }
  const bool json_, values_;
  uint64_t rows_ = 0;
  std::string out_;
};

Status run_ls(const LsArgs& a, bool json) {
  // The range: [start, end) within the prefix's range.
  std::string begin = std::max(a.start, a.prefix);
  // Keys that start with NUL are bookkeeping (pm mount's file metadata and
  // directory markers), not data: listed with --all only, and they sort
  // first, so the range starts past them.
  if (!a.all) begin = std::max(begin, std::string(1, '\x01'));
  std::string end = kv::Store::prefix_end(a.prefix);
  if (!a.end.empty() && (end.empty() || a.end < end)) end = a.end;
  Result<std::unique_ptr<kv::Store>> s = open_store(a.store, Access::kRead);
  if (!s.ok()) return s.status();
  LsPrinter out(json, a.values);
  Status failed;
  uint64_t shown = 0;
  if (end.empty() || begin < end) {
    Status scanned = (*s)->scan(begin, end, 0, [&](std::string_view k, std::string_view v) {
      failed = out.row(k, v);
      return failed.ok() && (a.limit == 0 || ++shown < a.limit);
    });
    if (failed.ok()) failed = scanned.with_context(fmt::format("list {}", a.store.path));
  }
  if (!failed.ok()) {
    // The keys listed before the error stand (exit 1, the error on stderr).
    if (out.abandon()) g_json_report_printed = true;
    return failed;
  }
  return out.finish();
}

// ---------------------------------------------------------------- load

struct LoadArgs {
  StoreArgs store;
  std::string file, format = "tsv";
  bool partial = false;  // line by line: keep what precedes a bad line
};

// One input line to a key and a value: "key<TAB>value" (the value may hold
// more tabs), or a JSON object {"key": string, "value": string}, either
// field possibly as "..._base64" (pm/json_bytes.h).
Status pair_of(const Json& j, std::string* key, std::string* value) {
  if (!j.is_object()) return Status::invalid_argument(R"(expected {"key": string, "value": string})");
  PM_TRY(get_bytes(j, "key", key));
  return get_bytes(j, "value", value);
}

Status parse_line(const std::string& format, const std::string& line, std::string* key,
                  std::string* value) {
  if (format == "tsv") {
    const size_t tab = line.find('\t');
    if (tab == std::string::npos) return Status::invalid_argument("expected key<TAB>value");
    key->assign(line, 0, tab);
    value->assign(line, tab + 1);
    return Status();
  }
  const Json j = Json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Status::invalid_argument("not valid JSON");
  return pair_of(j, key, value);
}

struct LoadCount {
  uint64_t lines = 0, keys = 0;
};

constexpr uint64_t kProgressEvery = 100000;  // keys between progress lines on a TTY

// --partial: puts every line of `in` as it comes; stops at the first bad
// one, keeping the lines before it.
Status load_partial(std::istream& in, const std::string& format, kv::Store* s, LoadCount* n) {
  const bool tty = isatty(STDERR_FILENO);
  std::string line, key, value;
  while (std::getline(in, line)) {
    ++n->lines;
    if (line.empty()) continue;  // holds no key; lets files end in blank lines
    Status st = parse_line(format, line, &key, &value);
    if (st.ok()) st = s->put(key, value);
    if (!st.ok()) return st.with_context(fmt::format("line {}", n->lines));
    if (++n->keys % kProgressEvery == 0 && tty) {
      std::fprintf(stderr, "\rloaded %llu keys", static_cast<unsigned long long>(n->keys));
    }
  }
  if (tty && n->keys >= kProgressEvery) std::fprintf(stderr, "\r\033[K");
  if (in.bad()) return Status::io_error("read error");
  return Status();
}

struct Pair {
  uint64_t line;
  std::string key, value;
};

// Every line of `in`, parsed; the first bad one fails the whole input.
Status parse_all(std::istream& in, const std::string& format, std::vector<Pair>* out,
                 LoadCount* n) {
  if (format == "json") {  // one array of objects: what `pm kv ls --json --values` prints
    const Json doc = Json::parse(in, nullptr, /*allow_exceptions=*/false);
    if (doc.is_discarded() || !doc.is_array()) {
      return Status::invalid_argument("not a JSON array of {\"key\", \"value\"} objects");
    }
    for (const Json& e : doc) {
      Pair p{++n->lines, {}, {}};
      PM_TRY(pair_of(e, &p.key, &p.value).with_context(fmt::format("element {}", n->lines)));
      out->push_back(std::move(p));
    }
    return Status();
  }
  std::string line;
  while (std::getline(in, line)) {
    ++n->lines;
    if (line.empty()) continue;
    Pair p{n->lines, {}, {}};
    PM_TRY(parse_line(format, line, &p.key, &p.value).with_context(fmt::format("line {}", n->lines)));
    out->push_back(std::move(p));
  }
  if (in.bad()) return Status::io_error("read error");
  return Status();
}

// Restores what the batches in `done` overwrote, last batch first.
template <typename Undo>
Status undo(kv::Store* s, std::vector<Undo>* done) {
  for (auto b = done->rbegin(); b != done->rend(); ++b) {
    std::unique_ptr<kv::Transaction> t = s->begin();
    for (auto& [key, old] : b->old) PM_TRY(old ? t->put(key, *old) : t->remove(key));
    PM_TRY(t->commit());
  }
  return Status();
}

// The default: all or nothing, short of a crash (the transactions applied
// before it stay; undoing them would need one transaction for the whole
// load, which a log record bounds). The input is parsed first (a bad line loads
// nothing and creates no store), then applied in transactions of bounded
// size, each remembering what its keys held; when one fails (a key or value
// over the store's limits, a full disk) the ones before it are undone in
// reverse order. Another writer of the same keys meanwhile may see, and
// lose to, the undo.
Status load_all(const std::vector<Pair>& pairs, std::string_view unit, kv::Store* s,
                LoadCount* n) {
  // Every pair against the store's limits first: a bad line is named and
  // nothing is applied.
  const kv::StoreStats st0 = s->stats();
  for (const Pair& p : pairs) {
    if (p.key.empty() || p.key.size() > st0.max_key_bytes) {
      return Status::invalid_argument(fmt::format(
          "{} {}: key of {} bytes is outside 1..{} (the store's limit)", unit, p.line, p.key.size(),
          st0.max_key_bytes));
    }
    if (p.value.size() > st0.max_value_bytes) {
      return Status::invalid_argument(
          fmt::format("{} {}: value of {} bytes is over the limit of {}", unit, p.line,
                      p.value.size(), st0.max_value_bytes));
    }
  }
  // Batches well within one log record (a quarter of a log): a pair joins
  // a batch only when the batch stays under the bound with it (a pair
  // alone may be larger; the store's value limit keeps it in a record).
  const size_t kBatchBytes = std::min<uint64_t>(64 << 10, st0.max_record_bytes / 4);
  constexpr size_t kOpBytes = 32;  // a record's bytes per operation, beside key and value
  constexpr size_t kBatchOps = 512;
  struct Undo {
    std::vector<std::pair<std::string, std::optional<std::string>>> old;  // key, prior value
  };
  std::vector<Undo> done;
  const bool tty = isatty(STDERR_FILENO);
  for (size_t i = 0; i < pairs.size();) {
    std::unique_ptr<kv::Transaction> t = s->begin();
    Undo u;
    size_t bytes = 0;
    const size_t first = i;
    auto fits = [&](const Pair& p) {
      return bytes + p.key.size() + p.value.size() + kOpBytes <= kBatchBytes &&
             i - first < kBatchOps;
    };
    for (; i < pairs.size() && (i == first || fits(pairs[i])); i++) {
      const Pair& p = pairs[i];
      std::string v;
      Status g = s->get(p.key, &v);
      if (!g.ok() && !g.is_not_found()) return g.with_context(fmt::format("{} {}", unit, p.line));
      u.old.emplace_back(p.key, g.ok() ? std::optional<std::string>(std::move(v)) : std::nullopt);
      PM_TRY(t->put(p.key, p.value));
      bytes += p.key.size() + p.value.size() + kOpBytes;
    }
    Status st = t->commit();
    if (!st.ok()) {
      const std::string where = i - first == 1 ? fmt::format("{} {}", unit, pairs[first].line)
                                              : fmt::format("{}s {}-{}", unit, pairs[first].line,
                                                            pairs[i - 1].line);
      Status undone = undo(s, &done);
      n->keys = 0;
      if (!undone.ok()) {
        return Status::io_error(fmt::format("{}: {}; undoing the {} keys loaded before failed "
                                            "too, so some of them remain: {}",
                                            where, st.message(), first, undone.message()));
      }
      if (first == 0) return st.with_context(where);
      // Else "nothing loaded ... lines 4641-5000" read as if lines 1-4640
      // had stayed loaded (a user trial on a full disk).
      return Status::of(st.code(), fmt::format("{}: {}; the {} key{} put before {} taken back",
                                               where, st.message(), first, first == 1 ? "" : "s",
                                               first == 1 ? "it was" : "them were"));
    }
    done.push_back(std::move(u));
    n->keys = i;
    if (tty && i / kProgressEvery != first / kProgressEvery) {
      std::fprintf(stderr, "\rloaded %llu keys", static_cast<unsigned long long>(n->keys));
    }
  }
  if (tty && n->keys >= kProgressEvery) std::fprintf(stderr, "\r\033[K");
  return Status();
}

void print_load(const LoadArgs& a, const LoadCount& n, bool json) {
  if (json) {
    fmt::print(
        "{}\n",
        json_text(
            {{"store", a.store.path}, {"file", a.file}, {"keys", n.keys}, {"lines", n.lines}}));
  } else {
    fmt::print("loaded {} key{} into {}\n", n.keys, n.keys == 1 ? "" : "s", a.store.path);
  }
}

Status run_load(LoadArgs a, bool json) {
  std::ifstream file;
  if (a.file != "-") {
    // A directory opens, and reading it fails with no cause the stream keeps.
    struct stat st;
    if (::stat(a.file.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
      return Status::invalid_argument(a.file + " is a directory, not a file to load");
    }
    file.open(a.file, std::ios::binary);
    if (!file) return Status::from_errno("open " + a.file, errno);
  }
  std::istream& in = a.file == "-" ? std::cin : file;
  LoadCount n;
  std::vector<Pair> pairs;
  const std::string nothing = "nothing loaded from " + a.file;
  // A JSON document is read whole, even with --partial.
  const bool whole = !a.partial || a.format == "json";
  if (whole) PM_TRY(parse_all(in, a.format, &pairs, &n).with_context(nothing));
  // Nothing is acknowledged before the checkpoint below, which makes every
  // loaded key durable, so the puts need not be durable one by one.
  a.store.async = true;
  const std::string_view unit = a.format == "json" ? "element" : "line";
  if (!file_exists(a.store.path)) {
    for (const Pair& p : pairs) {
      PM_TRY(check_new_store_limits(a.store, fmt::format("{} {}", unit, p.line), p.key.size(),
                                    p.value.size())
                 .with_context(nothing));
    }
  }
  Result<std::unique_ptr<kv::Store>> s = open_store(a.store, Access::kCreate);
  if (!s.ok()) return s.status();
  Status st = !whole ? load_partial(in, a.format, s->get(), &n)
                     : load_all(pairs, unit, s->get(), &n);
  // The checkpoint applies the keys to the backend. Failing (a full disk),
  // they are loaded all the same once the logs that hold them are durable:
  // the next open applies them. A load that failed says so first (what
  // it put, and whether its undo worked, are in its own message).
  if (Status cp = (*s)->checkpoint(); !cp.ok()) {
    if (Status sy = (*s)->sync(); !sy.ok()) {
      if (!st.ok()) return st.with_context(a.partial ? a.file : nothing);
      return sy.with_context(fmt::format(
          "{} keys were put, but neither applying them ({}) nor syncing the logs that hold them "
          "worked: some may be lost at a crash; sync",
          n.keys, cp.to_string()));
    }
    // A note, not a failure: said as "applying failed" beside "loaded 5000
    // keys", a user trial read the two as contradictory. (A load that
    // failed and was taken back says so in its own message.)
    if (st.ok() || a.partial) {
      std::fprintf(stderr,
                   "pm kv load: note: %s: the keys are loaded and durable in the store's logs, "
                   "but applying them to its heap waits for room (%s): removes, or more space on "
                   "its file system, let the store apply them (each open retries)\n",
                   a.store.path.c_str(), cp.to_string().c_str());
    }
  }
  // With --partial the keys before a bad line stay loaded: report them too.
  if (st.ok() || a.partial) print_load(a, n, json);
  if (!st.ok()) return st.with_context(a.partial ? a.file : nothing);
  return Status();
}

// ---------------------------------------------------------------- stats

Status run_stats(const StoreArgs& a, bool json) {
  Result<std::unique_ptr<kv::Store>> s = open_store(a, Access::kRead);
  if (!s.ok()) return s.status();
  const auto rows = bench::kv_stat_rows((*s)->stats());
  if (json) {
    Json obj = {{"store", a.path}};
    for (const auto& [name, v] : rows) obj[name] = v;
    fmt::print("{}\n", json_text(obj));
    return Status();
  }
  // Counters (puts, gets, ...) count this process only: since the open.
  size_t width = 0;
  for (const auto& row : rows) width = std::max(width, std::strlen(row.first) + 2);
  for (const auto& [name, v] : rows) {
    std::string shown = v.is_string() ? v.get<std::string>() : "";
    if (!v.is_string()) shown = v.dump(-1, ' ', false, Json::error_handler_t::replace);
    fmt::print("{:<{}}{}\n", name, width, shown);
  }
  return Status();
}

// ---------------------------------------------------------------- salvage

struct SalvageArgs {
  std::string from, to;
};

Status run_salvage(const SalvageArgs& a, bool json) {
  if (!file_exists(a.from)) return Status::not_found(a.from + ": no such store");
  Result<kv::SalvageReport> r = kv::salvage(a.from, a.to);
  if (!r.ok()) return r.status();
  if (json) {
    fmt::print("{}\n", json_text(Json{{"from", a.from},
                                 {"to", a.to},
                                 {"keys", r->keys},
                                 {"from_logs", r->from_logs},
                                 {"damaged_entries", r->damaged_entries},
                                 {"problems", r->problems}}));
  } else {
    fmt::print("{:<18}{}\n{:<18}{} ({} updates from the logs)\n{:<18}{}\n", "salvaged into", a.to,
               "keys", r->keys, r->from_logs, "damaged entries", r->damaged_entries);
    for (const std::string& p : r->problems) fmt::print("{:<18}{}\n", "not read", p);
  }
  g_json_report_printed = json;
  // Something could not be read: the copy is incomplete; exit 1.
  if (!r->problems.empty()) {
    return Status::corruption(fmt::format("{} part(s) of {} could not be read; {} has the rest",
                                          r->problems.size(), a.from, a.to));
  }
  return Status();
}

// ---------------------------------------------------------------- registration

void add_put_get_del(CLI::App* kv, const Globals& g, std::vector<Command>* out) {
  auto put = std::make_shared<KeyArgs>();
  CLI::App* p = kv->add_subcommand("put", "set KEY to VALUE (or to stdin), creating the store");
  add_key_arg(p, put.get(), Access::kCreate);
  put->value_opt = p->add_option("value", put->value, "value; omitted or '-': read stdin");
  out->push_back({p, [put, &g] { return run_put(*put, g.json); }});

  auto get = std::make_shared<KeyArgs>();
  CLI::App* gt = kv->add_subcommand("get", "write KEY's value to stdout as it is");
  add_key_arg(gt, get.get(), Access::kRead);
  out->push_back({gt, [get, &g] { return run_get(*get, g.json); }});

  auto del = std::make_shared<KeyArgs>();
  CLI::App* d = kv->add_subcommand("del", "remove KEY (fails when it is absent)");
  add_key_arg(d, del.get(), Access::kWrite);
  out->push_back({d, [del, &g] { return run_del(*del, g.json); }});
}

void add_ls_load_stats(CLI::App* kv, const Globals& g, std::vector<Command>* out) {
  auto ls = std::make_shared<LsArgs>();
  CLI::App* l = kv->add_subcommand(
      "ls", "list keys in byte order, one per line, as they are read (a read that fails midway "
            "exits 1 after the keys before it); bytes are printed as they are, so keys or values "
            "with newlines or tabs need 'pm --json kv ls'");
  add_store_args(l, &ls->store, Access::kRead);
  l->add_option("--prefix", ls->prefix, "only keys that start with this");
  l->add_option("--start", ls->start, "only keys from this one on (inclusive)");
  l->add_option("--end", ls->end, "only keys below this one (exclusive)");
  l->add_option("--limit", ls->limit, "at most this many keys (0: all)")->check(kCount);
  l->add_flag("--values", ls->values, "also print values (key<TAB>value)");
  l->add_flag("--all", ls->all,
              "also keys that start with a NUL byte: pm mount keeps its metadata there, and "
              "they are left out without it (stats counts them)");
  out->push_back({l, [ls, &g] { return run_ls(*ls, g.json); }});

  auto load = std::make_shared<LoadArgs>();
  CLI::App* ld = kv->add_subcommand(
      "load", "put every line of FILE ('-': stdin), then checkpoint; creates the store");
  add_store_args(ld, &load->store, Access::kCreate);
  ld->add_option("file", load->file, "input file")->required();
  ld->add_option("--format", load->format,
                 "tsv: key<TAB>value lines; jsonl: one {\"key\",\"value\"} object per line; "
                 "json: an array of them (kv ls --json --values); \"key_base64\"/\"value_base64\" "
                 "for bytes that are not UTF-8")
      ->check(CLI::IsMember({"tsv", "jsonl", "json"}))
      ->capture_default_str();
  ld->add_flag("--partial", load->partial,
               "line by line: a bad line stops the load but the lines before it stay loaded "
               "(default: all or nothing for bad lines and failed puts; a crash keeps what "
               "was loaded before it)");
  out->push_back({ld, [load, &g] { return run_load(*load, g.json); }});

  auto stats = std::make_shared<StoreArgs>();
  CLI::App* st = kv->add_subcommand("stats", "show the store's counters and sizes");
  add_store_args(st, stats.get(), Access::kRead);
  out->push_back({st, [stats, &g] { return run_stats(*stats, g.json); }});

  auto sv = std::make_shared<SalvageArgs>();
  CLI::App* sa = kv->add_subcommand(
      "salvage", "copy every key that can be read from a damaged store into a new one");
  sa->add_option("store", sv->from,
                 "the damaged store (read only; written only to finish a commit its last "
                 "session died inside)")
      ->required()
      ->check(kPath);
  sa->add_option("new-store", sv->to, "the store to create")->required()->check(kPath);
  out->push_back({sa, [sv, &g] { return run_salvage(*sv, g.json); }});
}

}  // namespace

// `kv` is one Command whose run picks the subcommand that was parsed, so
// that main.cc reports failures as "pm kv: ...".
void add_kv_commands(CLI::App& root, const Globals& g, std::vector<Command>* out) {
  CLI::App* kv = root.add_subcommand("kv", "a crash-safe key-value store in a container file");
  kv->require_subcommand(1);
  auto subs = std::make_shared<std::vector<Command>>();
  add_put_get_del(kv, g, subs.get());
  add_ls_load_stats(kv, g, subs.get());
  out->push_back({kv, [subs]() -> Status {
                    for (const Command& c : *subs) {
                      if (c.app->parsed()) return c.run();
                    }
                    return Status::invalid_argument("no kv subcommand");  // require_subcommand
                  }});
}

}  // namespace pm::cli
