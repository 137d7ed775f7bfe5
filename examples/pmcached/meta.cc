// The meta protocol (mg, ms, md, ma, me) as memcached 1.6.18 speaks it:
// the version Debian ships, which tests/pmcached/meta_fuzz_test.py runs
// beside pmcached and compares reply by reply. Its quirks are kept where a
// client could see them: which flags each command prints back, and which
// error string each command gives for the same mistake.
#include <climits>

#include <fmt/format.h>

#include "protocol.h"

namespace pmcached {

namespace {

constexpr std::string_view kBadToken = "CLIENT_ERROR bad token in command line format";
constexpr std::string_view kOpaqueTooLong = "CLIENT_ERROR opaque token too long";
// md's and ma's answer to any flag error (mg and ms name the error).
constexpr std::string_view kInvalidOrDuplicate = "CLIENT_ERROR invalid or duplicate flag";
// Tokens on a meta command line, counting memcached's terminal one.
constexpr size_t kMaxMetaTokens = 20;
constexpr size_t kMaxOpaque = 32;  // the token, its O included

// ---------------------------------------------------------------- base64 (b)

constexpr std::string_view kBase64 =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

std::string base64_encode(std::string_view in) {
  std::string out;
  for (size_t i = 0; i < in.size(); i += 3) {
    const size_t left = in.size() - i;
    uint32_t v = static_cast<uint32_t>(static_cast<uint8_t>(in[i])) << 16;
    if (left > 1) v |= static_cast<uint32_t>(static_cast<uint8_t>(in[i + 1])) << 8;
    if (left > 2) v |= static_cast<uint8_t>(in[i + 2]);
    out += kBase64[v >> 18 & 63];
    out += kBase64[v >> 12 & 63];
    out += left > 1 ? kBase64[v >> 6 & 63] : '=';
    out += left > 2 ? kBase64[v & 63] : '=';
  }
  return out;
}

// Base64 as memcached decodes it: bytes outside the alphabet (and '=')
// are skipped; what is left must be whole groups of four; the first group
// with padding ends the key. False when nothing (or too much padding) is
// left.
bool base64_decode(std::string_view in, std::string* out) {
  out->clear();
  size_t count = 0;
  for (char c : in) count += c == '=' || kBase64.find(c) != std::string_view::npos;
  if (count == 0 || count % 4 != 0) return false;
  uint32_t group = 0;
  size_t n = 0, pad = 0;
  for (char c : in) {
    const size_t d = kBase64.find(c);
    if (c != '=' && d == std::string_view::npos) continue;
    pad += c == '=';
    group = group << 6 | (c == '=' ? 0 : static_cast<uint32_t>(d));
    if (++n < 4) continue;
    if (pad > 2) return false;
    for (size_t i = 0; i < 3 - pad; i++) out->push_back(static_cast<char>(group >> (16 - 8 * i)));
    if (pad > 0) break;
    group = 0;
    n = 0;
  }
  return !out->empty();
}

// ---------------------------------------------------------------- flags

// A command's flags, parsed as memcached's _meta_flag_preparse does: every
// command knows every flag (ms ignores v, mg ignores F); a duplicate or an
// unknown flag ends the parse; a bad argument does not, and the last one's
// message is the reply.
struct Flags {
  std::string_view key;  // decoded when b
  std::string decoded;
  std::string_view* tok = nullptr;  // the flags as sent, for the reply
  size_t n = 0;
  bool binary = false, value = false, quiet = false, bump = true, stale = false;
  std::optional<uint64_t> cas;          // C
  std::optional<int64_t> ttl;           // T
  std::optional<int64_t> vivify;        // N
  std::optional<int64_t> recache;       // R
  uint32_t client_flags = 0;            // F
  char mode = 0;                        // M
  uint64_t delta = 1, initial = 0;      // D, J
  bool touch_after_vivify = false;      // T comes after N
};

bool parse_flags(std::string_view* tok, size_t first, size_t n, Flags* f, std::string_view* err) {
  f->key = tok[1];
  f->tok = tok + first;
  f->n = n - first;
  bool seen[128] = {};
  bool bad = false;
  auto fail = [&](std::string_view e) {
    *err = e;
    bad = true;
  };
  for (size_t i = first; i < n; i++) {
    const auto c = static_cast<unsigned char>(tok[i][0]);
    if (c >= 127 || seen[c]) {
      *err = "CLIENT_ERROR duplicate flag";
      return false;
    }
    seen[c] = true;
    const std::string_view arg = tok[i].substr(1);
    int32_t v32;
    switch (c) {
      case 'b':
        if (!base64_decode(tok[1], &f->decoded)) fail("CLIENT_ERROR error decoding key");
        f->key = f->decoded;
        f->binary = true;
        break;
      case 'N':
      case 'T':
      case 'R':
        if (!parse_i32(arg, &v32)) {
          fail(kBadToken);
          break;
        }
        (c == 'N' ? f->vivify : c == 'T' ? f->ttl : f->recache) = v32;
        if (c == 'T') f->touch_after_vivify = seen[static_cast<unsigned char>('N')];
        break;
      case 'v': f->value = true; break;
      case 'u': f->bump = false; break;
      case 'q': f->quiet = true; break;
      case 'I': f->stale = true; break;
      case 'F':
        if (!parse_u32_wrap(arg, &f->client_flags)) bad = true;  // (memcached sets no message)
        break;
      case 'C': {
        uint64_t v;
        if (parse_u64(arg, &v)) f->cas = v; else fail(kBadToken);
        break;
      }
      case 'M':
        if (arg.size() != 1) fail("CLIENT_ERROR incorrect length for M token");
        else f->mode = arg[0];
        break;
      case 'J':
        if (!parse_u64(arg, &f->initial)) fail("CLIENT_ERROR invalid numeric initial value");
        break;
      case 'D':
        if (!parse_u64(arg, &f->delta)) fail("CLIENT_ERROR invalid numeric delta value");
        break;
      case 'O': case 'P': case 'L': case 'k': case 's': case 't': case 'c': case 'f':
      case 'h': case 'l':
        break;
      default:
        *err = "CLIENT_ERROR invalid flag";
        return false;
    }
  }
  return !bad;
}

// Where the first opaque too long stands among the flags (f.n: none).
// memcached finds it as it writes mg's or ma's reply, after the command
// ran: flags before it took effect, those after it did not.
size_t opaque_too_long(const Flags& f) {
  for (size_t i = 0; i < f.n; i++) {
    if (f.tok[i][0] == 'O' && f.tok[i].size() > kMaxOpaque) return i;
  }
  return f.n;
}

// Whether flag c stands among the first `end` flags.
bool flag_before(const Flags& f, char c, size_t end) {
  for (size_t i = 0; i < end; i++) {
    if (f.tok[i][0] == c) return true;
  }
  return false;
}

// The k flag: the key as sent, or in base64 (with b) when it came so. A key
// whose bytes cannot stand in a reply line (an item a text command made
// from a base64 key, by append) is sent in base64 too, where memcached
// 1.6.18 sends the raw bytes and breaks the client's reading of the stream.
void append_key(std::string* out, std::string_view key, bool binary) {
  out->append(" k");
  for (char c : key) binary |= static_cast<unsigned char>(c) <= 0x20 || c == 0x7f;
  if (!binary) {
    out->append(key);
    return;
  }
  out->append(base64_encode(key));
  out->append(" b");
}

// The O and k flags of a reply that has no item (a miss, NF, EX).
void append_opaque_and_key(std::string* out, const Flags& f) {
  for (size_t i = 0; i < f.n; i++) {
    if (f.tok[i][0] == 'O') out->append(" ").append(f.tok[i]);
    if (f.tok[i][0] == 'k') append_key(out, f.key, f.binary);
  }
}

// TTL remaining as memcached prints it: -1 for none.
std::string ttl_of(int64_t exptime, int64_t now) {
  return exptime == 0 ? "-1" : std::to_string(exptime - now);
}

// md's and ma's checks of their command line, the same in both: "" when
// it is good, else the reply (any flag error is "invalid or duplicate").
std::string_view parse_md_ma(std::string_view* tok, size_t n, Flags* f) {
  if (n < 2) return "ERROR";
  if (tok[1].size() > kMaxKey) return kBadFormat;
  if (n + 1 > kMaxMetaTokens) return "CLIENT_ERROR options flags too long";
  std::string_view err;
  if (!parse_flags(tok, 2, n, f, &err)) return kInvalidOrDuplicate;
  return {};
}

}  // namespace


// ---------------------------------------------------------------- mg

void Session::meta_get(std::string_view* tok, size_t n, std::string* out) {
  if (n < 2) return reply(out, "ERROR");
  if (tok[1].size() > kMaxKey) return reply(out, kBadFormat);
  if (n + 1 > kMaxMetaTokens) return reply(out, "CLIENT_ERROR options flags are too long");
  Flags f;
  std::string_view err = kBadFormat;
  if (!parse_flags(tok, 2, n, &f, &err)) return reply(out, err);
  // An opaque too long is an error after the lookup: a miss with N has
  // created the item then, and the flags before the opaque took effect.
  const size_t cut = opaque_too_long(f);
  MetaGet m;
  int64_t ttl = f.ttl.value_or(0);
  if (f.ttl && flag_before(f, 'T', cut)) m.touch = &ttl;
  m.vivify = f.vivify.has_value();
  if (flag_before(f, 'N', cut)) m.vivify_exptime = *f.vivify;
  // (N after the opaque has no effect, so T, if before it, decides.)
  m.touch_last = f.touch_after_vivify || !flag_before(f, 'N', cut);
  m.recache = f.recache;
  m.access = flag_before(f, 'h', f.n) || flag_before(f, 'l', f.n);
  for (size_t i = 0; i < f.n && f.tok[i][0] != 'R'; i++) {
    if (f.tok[i][0] == 'T') m.recache_after_touch = true;
  }
  // memcached records the access after its reply: an error reply then
  // skips it, but for a lookup with none of these flags, which records it
  // before.
  const bool late_bump = f.ttl || f.vivify || f.recache || flag_before(f, 'h', f.n) ||
                         flag_before(f, 'l', f.n);
  m.bump = f.bump && (cut == f.n || !late_bump);
  m.grant = cut == f.n;
  Item it;
  Result<bool> r = cache_->meta_get(f.key, &it, &m);
  if (!r.ok()) return server_error(out, r.status());
  if (m.created || m.won || m.touch != nullptr) wrote_ = true;
  if (cut < f.n) return reply(out, kOpaqueTooLong);
  if (!*r) {
    if (f.quiet) return;
    out->append("EN");
    append_opaque_and_key(out, f);
    out->append("\r\n");
    return;
  }
  if (f.value) {
    fmt::format_to(std::back_inserter(*out), "VA {}", it.data.size());
  } else {
    out->append("HD");
  }
  // t shows the expiry as it is at its place in the flags: T and N change
  // it where they stand.
  int64_t exptime = m.created ? 0 : m.exptime_before;
  const int64_t now = cache_->now();
  for (size_t i = 0; i < f.n; i++) {
    const std::string_view t = f.tok[i];
    switch (t[0]) {
      case 'T': if (m.touch != nullptr) exptime = cache_->absolute(ttl); break;
      case 'N': if (m.created) exptime = cache_->absolute(*f.vivify); break;
      case 's': fmt::format_to(std::back_inserter(*out), " s{}", it.data.size()); break;
      case 't': out->append(" t").append(ttl_of(exptime, now)); break;
      case 'c': fmt::format_to(std::back_inserter(*out), " c{}", it.cas); break;
      case 'f': fmt::format_to(std::back_inserter(*out), " f{}", it.flags); break;
      case 'l': fmt::format_to(std::back_inserter(*out), " l{}", m.idle); break;
      case 'h': out->append(m.fetched ? " h1" : " h0"); break;
      case 'O': out->append(" ").append(t); break;
      case 'k': append_key(out, f.key, (it.state & kKeyBinary) != 0); break;
      default: break;
    }
  }
  // As memcached: Z (someone else recaches), X (stale), W (you recache).
  if ((it.state & kTokenSent) != 0 && !m.won) out->append(" Z");
  if ((it.state & kStale) != 0) out->append(" X");
  if (m.won) out->append(" W");
  out->append("\r\n");
  if (f.value) out->append(it.data).append("\r\n");
}

// ---------------------------------------------------------------- ms

void Session::meta_set(std::string_view* tok, size_t n, std::string* out) {
  if (n < 2) return reply(out, "ERROR");
  if (tok[1].size() > kMaxKey || n == 2) return reply(out, kBadFormat);
  if (n + 1 > kMaxMetaTokens) return reply(out, "CLIENT_ERROR options flags too long");
  int32_t bytes;
  if (!parse_i32(tok[2], &bytes) || bytes < 0 || bytes > INT_MAX - 2) {
    return reply(out, kBadFormat);
  }
  // From here on an error also drops the data block that follows.
  auto refuse = [&](std::string_view e) {
    swallow_ = static_cast<uint64_t>(bytes) + 2;
    reply(out, e);
  };
  Flags f;
  std::string_view err = kBadFormat;
  if (!parse_flags(tok, 3, n, &f, &err)) return refuse(err);
  Pending p;
  switch (f.mode) {
    case 0: case 'S': p.mode = StoreMode::kSet; break;
    case 'E': p.mode = StoreMode::kAdd; break;
    case 'A': p.mode = StoreMode::kAppend; break;
    case 'P': p.mode = StoreMode::kPrepend; break;
    case 'R': p.mode = StoreMode::kReplace; break;
    default: return refuse("CLIENT_ERROR invalid mode for ms M token");
  }
  if (opaque_too_long(f) < f.n) return refuse(kOpaqueTooLong);
  // As memcached: a CAS makes set and replace a cas (append and prepend
  // compare it; add ignores it).
  if (f.cas && (p.mode == StoreMode::kSet || p.mode == StoreMode::kReplace)) {
    p.mode = StoreMode::kCas;
  }
  p.key.assign(f.key);
  p.flags = f.client_flags;
  p.exptime = f.ttl.value_or(0);
  p.cas = f.cas;
  p.meta = true;
  p.quiet = f.quiet;
  p.state = (f.binary ? kKeyBinary : 0) | (f.stale && p.mode == StoreMode::kCas ? kStale : 0);
  for (size_t i = 0; i < f.n; i++) p.meta_flags.emplace_back(f.tok[i]);
  await_data(std::move(p), bytes, out);
}

void Session::meta_set_reply(StoreResult r, uint64_t cas, std::string* out) {
  static constexpr std::string_view kCodes[] = {"HD", "NS", "EX", "NF"};
  if (r == StoreResult::kStored && pending_.quiet) return;
  out->append(kCodes[static_cast<size_t>(r)]);
  for (const std::string& t : pending_.meta_flags) {
    if (t[0] == 'O') out->append(" ").append(t);
    if (t[0] == 'k') append_key(out, pending_.key, (pending_.state & kKeyBinary) != 0);
    if (t[0] == 'c') fmt::format_to(std::back_inserter(*out), " c{}", cas);
  }
  out->append("\r\n");
}

// ---------------------------------------------------------------- md

void Session::meta_delete(std::string_view* tok, size_t n, std::string* out) {
  Flags f;
  if (std::string_view err = parse_md_ma(tok, n, &f); !err.empty()) return reply(out, err);
  if (opaque_too_long(f) < f.n) return reply(out, kOpaqueTooLong);
  int64_t ttl = f.ttl.value_or(0);
  Result<DeleteResult> r = f.stale ? cache_->invalidate(f.key, f.cas, f.ttl ? &ttl : nullptr)
                                   : cache_->remove(f.key, f.cas);
  if (!r.ok()) return server_error(out, r.status());
  if (*r == DeleteResult::kDeleted) {
    wrote_ = true;
    if (f.quiet) return;
  }
  static constexpr std::string_view kCodes[] = {"HD", "NF", "EX"};
  out->append(kCodes[static_cast<size_t>(*r)]);
  append_opaque_and_key(out, f);
  out->append("\r\n");
}

// ---------------------------------------------------------------- ma

void Session::meta_arithmetic(std::string_view* tok, size_t n, std::string* out) {
  Flags f;
  if (std::string_view err = parse_md_ma(tok, n, &f); !err.empty()) return reply(out, err);
  bool incr = true;
  switch (f.mode) {
    case 0: case 'I': case '+': break;
    case 'D': case '-': incr = false; break;
    default: return reply(out, "CLIENT_ERROR invalid mode for ma M token");
  }
  // As in mg, an opaque too long is an error after the change.
  const size_t cut = opaque_too_long(f);
  DeltaOptions o;
  o.compare_cas = f.cas;
  o.vivify = f.vivify.has_value();
  if (flag_before(f, 'N', cut)) o.vivify_exptime = *f.vivify;
  int64_t ttl = f.ttl.value_or(0);
  if (f.ttl && flag_before(f, 'T', cut)) o.touch = &ttl;
  o.touch_last = f.touch_after_vivify || !flag_before(f, 'N', cut);
  o.initial = f.initial;
  int64_t exptime_before = 0;
  o.exptime_before = &exptime_before;
  uint64_t v = 0;
  Item it;
  Result<DeltaResult> r = cache_->delta(f.key, incr, f.delta, &v, o, &it);
  if (!r.ok()) return server_error(out, r.status());
  if (*r == DeltaResult::kOk || *r == DeltaResult::kCreated) wrote_ = true;
  if (cut < f.n && *r != DeltaResult::kNonNumeric && *r != DeltaResult::kNoMemory) {
    return reply(out, kOpaqueTooLong);
  }
  switch (*r) {
    case DeltaResult::kNonNumeric:
      return reply(out, "CLIENT_ERROR cannot increment or decrement non-numeric value");
    case DeltaResult::kNoMemory:
      return reply(out, "SERVER_ERROR Out of memory allocating new item");
    case DeltaResult::kNotFound:
    case DeltaResult::kExists:
      out->append(*r == DeltaResult::kNotFound ? "NF" : "EX");
      append_opaque_and_key(out, f);
      out->append("\r\n");
      return;
    case DeltaResult::kOk:
    case DeltaResult::kCreated:
      break;
  }
  const bool created = *r == DeltaResult::kCreated;
  if (f.quiet && !created) return;  // (memcached answers a created one)
  const std::string number = std::to_string(v);  // without memcached's padding
  if (f.value) {
    fmt::format_to(std::back_inserter(*out), "VA {}", number.size());
  } else {
    out->append("HD");
  }
  // As in mg, t shows the expiry as T and N leave it where it stands.
  int64_t exptime = created ? 0 : exptime_before;
  const int64_t now = cache_->now();
  for (size_t i = 0; i < f.n; i++) {
    const std::string_view t = f.tok[i];
    switch (t[0]) {
      case 'T': if (o.touch != nullptr) exptime = cache_->absolute(ttl); break;
      case 'N': if (created) exptime = cache_->absolute(*f.vivify); break;
      case 'c': fmt::format_to(std::back_inserter(*out), " c{}", it.cas); break;
      case 't': out->append(" t").append(ttl_of(exptime, now)); break;
      case 'O': out->append(" ").append(t); break;
      case 'k': append_key(out, f.key, f.binary); break;
      default: break;
    }
  }
  out->append("\r\n");
  if (f.value) out->append(number).append("\r\n");
}

// ---------------------------------------------------------------- me

void Session::meta_debug(std::string_view* tok, size_t n, std::string* out) {
  if (n < 2 || tok[1].size() > kMaxKey) return reply(out, kBadFormat);
  std::string key(tok[1]);
  if (n >= 3 && tok[2] == "b" && !base64_decode(tok[1], &key)) return reply(out, kBadFormat);
  Item it;
  bool fetched;
  int64_t idle;
  Result<bool> r = cache_->debug(key, &it, &fetched, &idle);
  if (!r.ok()) return server_error(out, r.status());
  if (!*r) return reply(out, "EN");
  const bool binary = (it.state & kKeyBinary) != 0;
  // exp as memcached prints it: now minus the expiry (negative while it
  // lives), -1 for none. cls and size are memcached's slab class and
  // allocation: one class here, and the bytes the item holds.
  const int64_t now = cache_->now();
  fmt::format_to(std::back_inserter(*out), "ME {} exp={} la={} cas={} fetch={} cls=1 size={}\r\n",
                 binary ? base64_encode(key) : key, it.exptime == 0 ? -1 : now - it.exptime, idle,
                 it.cas, fetched ? "yes" : "no", key.size() + it.data.size() + 48);
}

}  // namespace pmcached
