#include "protocol.h"


#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <fmt/format.h>

namespace pmcached {

namespace {

// A CAS unique given by the client (0 too: it then matches no item).
bool parse_cas(std::string_view s, std::optional<uint64_t>* out) {
  uint64_t v;
  if (!parse_u64(s, &v)) return false;
  *out = v;
  return true;
}

// A key memcached accepts: 1..250 bytes (the tokenizer already split on
// spaces). Its protocol text forbids control characters, but memcached
// stores them, and clients send them (pymemcache passes "user\x01name"):
// refusing one made the set's data block run as a command (a value of
// "flush_all" emptied the cache; a user trial). Keys starting with NUL
// cannot reach the cache's own records (cache.cc).
bool valid_key(std::string_view k) { return !k.empty() && k.size() <= kMaxKey; }

size_t tokenize(std::string_view line, std::vector<std::string_view>* tok) {
  tok->clear();
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && line[i] == ' ') i++;
    const size_t b = i;
    while (i < line.size() && line[i] != ' ') i++;
    if (i > b) tok->push_back(line.substr(b, i - b));
  }
  return tok->size();
}

}  // namespace

bool parse_i32(std::string_view s, int32_t* out) {
  const std::string z(s);
  char* end = nullptr;
  errno = 0;
  const long v = std::strtol(z.c_str(), &end, 10);
  if (errno == ERANGE || end == z.c_str() || (*end != '\0' && !std::isspace(*end))) return false;
  *out = static_cast<int32_t>(static_cast<uint32_t>(v));
  return true;
}

bool parse_u32_wrap(std::string_view s, uint32_t* out) {
  uint64_t v;
  if (!parse_u64(s, &v)) return false;
  *out = static_cast<uint32_t>(v);
  return true;
}

void Session::reply(std::string* out, std::string_view s) {
  if (noreply_) return;
  out->append(s);
  out->append("\r\n");
}

void Session::server_error(std::string* out, const Status& s) {
  reply(out, "SERVER_ERROR " + s.message());
}

size_t Session::feed(std::string_view in, std::string* out, size_t out_limit) {
  size_t used = 0;
  out_limit_ = out_limit;
  while (!closing_ && out->size() < out_limit) {
    if (get_.streaming) {  // a get's reply goes on before the next command
      values(std::string_view(get_.rest).substr(get_.at), out);
      continue;
    }
    if (dumping_) {
      metadump(out);
      continue;
    }
    if (used == in.size()) break;
    std::string_view rest = in.substr(used);
    if (swallow_ > 0) {
      const size_t n = std::min<uint64_t>(swallow_, rest.size());
      swallow_ -= n;
      used += n;
      continue;
    }
    if (has_pending_) {
      if (rest.size() < pending_.bytes + 2) break;  // the data block is not all here
      data_block(rest.substr(0, pending_.bytes + 2), out);
      used += pending_.bytes + 2;
      continue;
    }
    // The binary protocol, which memcached tells by the connection's first
    // byte only (later, in a text connection, 0x80 starts an unknown
    // command).
    if (!started_) binary_ = static_cast<unsigned char>(rest[0]) == 0x80;
    started_ = true;
    if (binary_) {
      const size_t n = binary_request(rest, out);
      if (n == 0) break;
      used += n;
      continue;
    }
    const size_t nl = rest.find('\n');
    if (nl == std::string_view::npos) {
      // memcached closes a connection whose line grows past its limit; long
      // retrieval lines (many keys) are allowed further.
      const bool retrieval = rest.starts_with("get") || rest.starts_with("gat");
      if (rest.size() > (retrieval ? kMaxRetrievalLine : kMaxLine)) {
        closing_ = true;
        used = in.size();
      }
      break;
    }
    std::string_view line = rest.substr(0, nl);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    used += nl + 1;
    noreply_ = false;
    if (line.size() > kMaxRetrievalLine) {
      closing_ = true;
      break;
    }
    command(line, out);
  }
  return used;
}

void Session::command(std::string_view line, std::string* out) {
  thread_local std::vector<std::string_view> tokv;
  const size_t n = tokenize(line, &tokv);
  std::string_view* tok = tokv.data();
  if (n == 0) return reply(out, "ERROR");
  const std::string_view cmd = tok[0];
  // noreply is the last token of the commands that take it.
  auto noreply_at = [&](size_t i) {
    if (n == i + 1 && tok[i] == "noreply") noreply_ = true;
  };
  if (cmd == "get" || cmd == "gets") return retrieval(cmd == "gets", false, tok, n, out);
  if (cmd == "gat" || cmd == "gats") return retrieval(cmd == "gats", true, tok, n, out);
  if (cmd == "set") return storage(StoreMode::kSet, tok, n, out);
  if (cmd == "add") return storage(StoreMode::kAdd, tok, n, out);
  if (cmd == "replace") return storage(StoreMode::kReplace, tok, n, out);
  if (cmd == "append") return storage(StoreMode::kAppend, tok, n, out);
  if (cmd == "prepend") return storage(StoreMode::kPrepend, tok, n, out);
  if (cmd == "cas") return storage(StoreMode::kCas, tok, n, out);
  if (cmd == "incr" || cmd == "decr") return delta(cmd == "incr", tok, n, out);
  if (cmd == "delete") {
    // delete <key> [0] [noreply]: the 0 is an old hold time, still accepted.
    if (n < 2 || n > 4) return reply(out, "ERROR");  // memcached's word for a wrong count
    const bool nr = n > 2 && tok[n - 1] == "noreply";
    const size_t args = n - (nr ? 1 : 0);
    noreply_ = nr;  // (silences the error too, as memcached's)
    if (args > 3 || (args == 3 && tok[2] != "0")) {
      return reply(out, "CLIENT_ERROR bad command line format.  Usage: delete <key> [noreply]");
    }
    if (!valid_key(tok[1])) return reply(out, kBadFormat);
    info_->prefixes.record_delete(tok[1]);
    Result<DeleteResult> r = cache_->remove(tok[1]);
    if (!r.ok()) return server_error(out, r.status());
    if (*r == DeleteResult::kDeleted) wrote_ = true;
    return reply(out, *r == DeleteResult::kDeleted ? "DELETED" : "NOT_FOUND");
  }
  if (cmd == "touch") {
    if (n != 3 && n != 4) return reply(out, "ERROR");
    noreply_at(3);
    int32_t exptime;
    if (!valid_key(tok[1])) return reply(out, kBadFormat);
    if (!parse_i32(tok[2], &exptime)) return reply(out, "CLIENT_ERROR invalid exptime argument");
    Result<bool> r = cache_->touch(tok[1], exptime);
    if (!r.ok()) return server_error(out, r.status());
    if (*r) wrote_ = true;
    return reply(out, *r ? "TOUCHED" : "NOT_FOUND");
  }
  if (cmd == "flush_all") {
    if (n > 3) return reply(out, "ERROR");
    noreply_at(n - 1);
    int32_t delay = 0;
    const size_t args = n - (noreply_ ? 1 : 0);
    if (args == 2 && !parse_i32(tok[1], &delay)) {
      return reply(out, "CLIENT_ERROR invalid exptime argument");
    }
    Status s = cache_->flush_all(delay);
    if (!s.ok()) return server_error(out, s);
    wrote_ = true;
    return reply(out, "OK");
  }
  if (cmd == "version") return reply(out, "VERSION " + info_->version);
  if (cmd == "verbosity") {
    if (n < 2 || n > 3) return reply(out, "ERROR");
    noreply_ = tok[n - 1] == "noreply";
    uint32_t level = 0;
    if (!parse_u32_wrap(tok[1], &level)) return reply(out, kBadFormat);
    info_->verbosity = static_cast<int>(std::min<uint32_t>(level, 3));
    return reply(out, "OK");
  }
  if (cmd == "quit") {
    closing_ = true;
    return;
  }
  if (cmd == "stats") return stats(tok, n, out);
  if (cmd == "lru_crawler") return lru_crawler(tok, n, out);
  if (cmd == "mn") return reply(out, "MN");
  if (cmd == "mg") return meta_get(tok, n, out);
  if (cmd == "ms") return meta_set(tok, n, out);
  if (cmd == "md") return meta_delete(tok, n, out);
  if (cmd == "ma") return meta_arithmetic(tok, n, out);
  if (cmd == "me") return meta_debug(tok, n, out);
  if (cmd == "shutdown") return reply(out, "ERROR: shutdown not enabled");
  reply(out, "ERROR");
}

void Session::retrieval(bool cas, bool touch, std::string_view* tok, size_t n, std::string* out) {
  const size_t first = touch ? 2 : 1;
  if (n < 2) return reply(out, "ERROR");
  int32_t exptime32 = 0;
  if (touch && !parse_i32(tok[1], &exptime32)) {
    return reply(out, "CLIENT_ERROR invalid exptime argument");
  }
  if (n == first) return reply(out, "END");  // gat <exptime> without keys, as memcached
  int64_t exptime = exptime32;
  for (size_t i = first; i < n; i++) {
    if (!valid_key(tok[i])) return reply(out, kBadFormat);
  }
  get_ = Retrieval();
  get_.cas = cas;
  get_.touch = touch;
  // A relative expiry counts from the command, as memcached's does: the
  // keys of a reply streamed over seconds all get the same one.
  if (exptime > 0 && exptime <= kRelativeExpiryMax) exptime += cache_->now();
  get_.exptime = exptime;
  const char* end = tok[n - 1].data() + tok[n - 1].size();
  values(std::string_view(tok[first].data(), static_cast<size_t>(end - tok[first].data())), out);
}

void Session::values(std::string_view keys, std::string* out) {
  Item it;
  const size_t start = out->size();
  for (size_t at = 0;;) {
    while (at < keys.size() && keys[at] == ' ') at++;
    if (at == keys.size()) break;
    if (out->size() >= out_limit_) {  // the rest once this part is sent
      if (get_.streaming) {
        get_.at += at;  // `keys` is get_.rest from get_.at
      } else {
        get_.rest.assign(keys.substr(at));
        get_.at = 0;
        get_.streaming = true;
      }
      return;
    }
    const size_t len = std::min(keys.find(' ', at), keys.size()) - at;
    const std::string_view key = keys.substr(at, len);
    at += len;
    Result<bool> r = cache_->get(key, &it, get_.touch ? &get_.exptime : nullptr);
    info_->prefixes.record_get(key, r.ok() && *r);
    if (!r.ok()) {
      // No VALUE lines without their END, unless some were sent already.
      if (!get_.streaming) out->resize(start);
      get_ = Retrieval();
      return server_error(out, r.status());
    }
    if (!*r) continue;
    if (get_.touch) wrote_ = true;
    out->append("VALUE ");
    out->append(key);
    fmt::format_to(std::back_inserter(*out), " {} {}", it.flags, it.data.size());
    if (get_.cas) fmt::format_to(std::back_inserter(*out), " {}", it.cas);
    out->append("\r\n");
    out->append(it.data);
    out->append("\r\n");
  }
  get_ = Retrieval();
  out->append("END\r\n");
}

void Session::storage(StoreMode mode, std::string_view* tok, size_t n, std::string* out) {
  const bool cas = mode == StoreMode::kCas;
  const size_t args = cas ? 6 : 5;
  if (n != args && n != args + 1) return reply(out, "ERROR");
  if (n == args + 1 && tok[args] == "noreply") noreply_ = true;
  Pending p;
  p.mode = mode;
  p.key = std::string(tok[1]);
  p.noreply = noreply_;
  // Numbers as memcached reads them: flags and exptime wrap at 32 bits.
  int32_t exptime, bytes;
  if (!parse_u32_wrap(tok[2], &p.flags) || !parse_i32(tok[3], &exptime) ||
      !parse_i32(tok[4], &bytes) || bytes < 0 || bytes > INT32_MAX - 2 ||
      (cas && !parse_cas(tok[5], &p.cas))) {
    return reply(out, kBadFormat);
  }
  p.exptime = exptime;
  // As memcached: after a bad key the data block is read as commands.
  if (!valid_key(tok[1])) return reply(out, kBadFormat);
  info_->prefixes.record_set(p.key);
  await_data(std::move(p), bytes, out);
}

void Session::await_data(Pending p, int64_t bytes, std::string* out) {
  if (static_cast<uint64_t>(bytes) > cache_->options().item_max) {
    swallow_ = static_cast<uint64_t>(bytes) + 2;  // read past it, not as commands
    // As memcached: a set that cannot be stored removes the old value, so
    // that a reader does not go on seeing data its writer replaced.
    // (ms: in any mode, as memcached's process_mset_command.)
    if (p.mode == StoreMode::kSet || p.meta) {
      Result<DeleteResult> r = cache_->remove(p.key, std::nullopt, /*count=*/false);
      if (!r.ok()) return server_error(out, r.status());
      // (Or'ed: the changes before it in this batch still wait for the sync.)
      if (*r == DeleteResult::kDeleted) wrote_ = true;
    }
    return reply(out, kTooLarge);
  }
  p.bytes = static_cast<size_t>(bytes);
  pending_ = std::move(p);
  has_pending_ = true;
}

void Session::data_block(std::string_view block, std::string* out) {
  has_pending_ = false;
  noreply_ = pending_.noreply;
  const std::string_view data = block.substr(0, pending_.bytes);
  if (block.substr(pending_.bytes) != "\r\n") return reply(out, "CLIENT_ERROR bad data chunk");
  uint64_t cas = 0;
  Result<StoreResult> r = cache_->store(pending_.mode, pending_.key, pending_.flags,
                                        pending_.exptime, data, pending_.cas, &cas,
                                        pending_.state);
  noreply_ = pending_.noreply;
  if (!r.ok()) return server_error(out, r.status());
  if (pending_.meta) {
    // (A set with no memory removed the old value: durable before the reply.)
    if (*r == StoreResult::kStored || *r == StoreResult::kNoMemory) wrote_ = true;
    if (*r == StoreResult::kTooLarge || *r == StoreResult::kNoMemory) {
      noreply_ = false;
      return reply(out, *r == StoreResult::kTooLarge ? kTooLarge
                                                     : "SERVER_ERROR out of memory storing object");
    }
    return meta_set_reply(*r, *r == StoreResult::kStored ? cas : 0, out);
  }
  switch (*r) {
    case StoreResult::kStored:
      wrote_ = true;
      return reply(out, "STORED");
    case StoreResult::kNotStored:
      return reply(out, "NOT_STORED");
    case StoreResult::kExists:
      return reply(out, "EXISTS");
    case StoreResult::kNotFound:
      return reply(out, "NOT_FOUND");
    case StoreResult::kTooLarge:
      return reply(out, kTooLarge);
    case StoreResult::kNoMemory:
      wrote_ = true;  // a set then removed the old value: durable before the reply
      return reply(out, "SERVER_ERROR out of memory storing object");
  }
}

void Session::delta(bool incr, std::string_view* tok, size_t n, std::string* out) {
  if (n != 3 && n != 4) return reply(out, "ERROR");
  if (n == 4 && tok[3] == "noreply") noreply_ = true;
  if (!valid_key(tok[1])) return reply(out, kBadFormat);
  uint64_t by;
  if (!parse_u64(tok[2], &by)) return reply(out, "CLIENT_ERROR invalid numeric delta argument");
  uint64_t v = 0;
  Result<DeltaResult> r = cache_->delta(tok[1], incr, by, &v);
  if (!r.ok()) return server_error(out, r.status());
  switch (*r) {
    case DeltaResult::kOk:
    case DeltaResult::kCreated:  // (not without DeltaOptions::vivify)
      wrote_ = true;
      return reply(out, std::to_string(v));
    case DeltaResult::kNotFound:
      return reply(out, "NOT_FOUND");
    case DeltaResult::kNonNumeric:
      return reply(out, "CLIENT_ERROR cannot increment or decrement non-numeric value");
    case DeltaResult::kExists:
      return reply(out, "EXISTS");
    case DeltaResult::kNoMemory:  // (not without DeltaOptions::vivify)
      return reply(out, "SERVER_ERROR out of memory");
  }
}

}  // namespace pmcached
