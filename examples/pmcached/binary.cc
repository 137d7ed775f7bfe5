// memcached's binary protocol (protocol_binary.h; memcached 1.6 still
// serves it, deprecated): a connection whose first byte is 0x80 speaks it
// to the end. Requests are a 24-byte header, extras, key and value;
// replies echo the opcode and opaque. Replies, status codes and error
// texts are memcached's, so that libmemcached's binary mode and
// memcapable's binary tests see no difference.

#include <optional>
#include <string>

#include "protocol.h"

namespace pmcached {

namespace {

constexpr size_t kHeader = 24;
constexpr uint8_t kRequestMagic = 0x80, kResponseMagic = 0x81;

enum Op : uint8_t {
  kGet = 0x00, kSet = 0x01, kAdd = 0x02, kReplace = 0x03, kDelete = 0x04, kIncr = 0x05,
  kDecr = 0x06, kQuit = 0x07, kFlush = 0x08, kGetQ = 0x09, kNoop = 0x0a, kVersion = 0x0b,
  kGetK = 0x0c, kGetKQ = 0x0d, kAppend = 0x0e, kPrepend = 0x0f, kStat = 0x10, kSetQ = 0x11,
  kAddQ = 0x12, kReplaceQ = 0x13, kDeleteQ = 0x14, kIncrQ = 0x15, kDecrQ = 0x16,
  kQuitQ = 0x17, kFlushQ = 0x18, kAppendQ = 0x19, kPrependQ = 0x1a, kTouch = 0x1c,
  kGat = 0x1d, kGatQ = 0x1e, kGatK = 0x23, kGatKQ = 0x24,
};

enum BinStatus : uint16_t {
  kOk = 0x00, kKeyNotFound = 0x01, kKeyExists = 0x02, kTooBig = 0x03, kInvalid = 0x04,
  kNotStoredStatus = 0x05, kNonNumericValue = 0x06, kUnknownCommand = 0x81,
  kOutOfMemory = 0x82, kInternalError = 0x84,
};

// memcached's texts for the statuses it sends without one of its own.
const char* status_text(uint16_t status) {
  switch (status) {
    case kKeyNotFound: return "Not found";
    case kKeyExists: return "Data exists for key.";
    case kTooBig: return "Too large.";
    case kInvalid: return "Invalid arguments";
    case kNotStoredStatus: return "Not stored.";
    case kNonNumericValue: return "Non-numeric server-side value for incr or decr";
    case kUnknownCommand: return "Unknown command";
    case kOutOfMemory: return "Out of memory";
    default: return "";
  }
}

uint32_t get_be(const char* p, int bytes) {
  uint32_t v = 0;
  for (int i = 0; i < bytes; i++) v = v << 8 | static_cast<unsigned char>(p[i]);
  return v;
}
uint64_t get_be64(const char* p) {
  return uint64_t{get_be(p, 4)} << 32 | get_be(p + 4, 4);
}
void put_be(std::string* out, uint64_t v, int bytes) {
  for (int i = bytes - 1; i >= 0; i--) out->push_back(static_cast<char>(v >> (8 * i)));
}

// The quiet opcodes: a success is not answered (a get's miss neither);
// errors are.
Op loud(uint8_t op, bool* quiet) {
  *quiet = true;
  switch (op) {
    case kGetQ: return kGet;
    case kGetKQ: return kGetK;
    case kSetQ: return kSet;
    case kAddQ: return kAdd;
    case kReplaceQ: return kReplace;
    case kDeleteQ: return kDelete;
    case kIncrQ: return kIncr;
    case kDecrQ: return kDecr;
    case kQuitQ: return kQuit;
    case kFlushQ: return kFlush;
    case kAppendQ: return kAppend;
    case kPrependQ: return kPrepend;
    case kGatQ: return kGat;
    case kGatKQ: return kGatK;
    default:
      *quiet = false;
      return static_cast<Op>(op);
  }
}

}  // namespace

// One request's header, as parsed, and where its parts are.
struct Session::BinRequest {
  uint8_t opcode;  // as sent (replies echo it)
  Op op;           // its loud form
  bool quiet;
  uint8_t extlen;
  uint16_t keylen;
  uint32_t bodylen;
  uint32_t opaque;  // echoed
  uint64_t cas;
  std::string_view extras, key, value;
};

void Session::bin_reply(const BinRequest& r, uint16_t status, std::string_view extras,
                        std::string_view key, std::string_view value, uint64_t cas,
                        std::string* out) {
  out->push_back(static_cast<char>(kResponseMagic));
  out->push_back(static_cast<char>(r.opcode));
  put_be(out, key.size(), 2);
  out->push_back(static_cast<char>(extras.size()));
  out->push_back(0);  // data type: raw bytes
  put_be(out, status, 2);
  put_be(out, extras.size() + key.size() + value.size(), 4);
  put_be(out, r.opaque, 4);
  put_be(out, cas, 8);
  out->append(extras);
  out->append(key);
  out->append(value);
}

void Session::bin_error(const BinRequest& r, uint16_t status, std::string* out,
                        std::string_view text) {
  bin_reply(r, status, {}, {}, text.empty() ? status_text(status) : text, 0, out);
}

size_t Session::binary_request(std::string_view in, std::string* out) {
  if (in.size() < kHeader) return 0;
  const char* h = in.data();
  if (static_cast<uint8_t>(h[0]) != kRequestMagic) {  // as memcached: no reply
    closing_ = true;
    return in.size();
  }
  BinRequest r;
  r.opcode = static_cast<uint8_t>(h[1]);
  r.op = loud(r.opcode, &r.quiet);
  r.keylen = static_cast<uint16_t>(get_be(h + 2, 2));
  r.extlen = static_cast<uint8_t>(h[4]);
  r.bodylen = get_be(h + 8, 4);
  r.opaque = get_be(h + 12, 4);
  r.cas = get_be64(h + 16);
  if (size_t{r.keylen} + r.extlen > r.bodylen) {
    bin_error(r, kUnknownCommand, out);
    closing_ = true;
    return in.size();
  }
  // Judged from the header alone, so that nothing a request claims is
  // buffered before it is known to be wanted (a body length of 4 GiB held
  // a connection's input until all of it came).
  if (r.keylen > kMaxKey) return bin_protocol_error(r, out, in.size());
  if (!known(r.op)) {  // answered at once; its body is read past
    bin_error(r, kUnknownCommand, out);
    swallow_ = r.bodylen;
    return kHeader;
  }
  if (!bin_valid(r)) return bin_protocol_error(r, out, in.size());
  const size_t head = kHeader + r.extlen + r.keylen;
  const uint64_t value_len = r.bodylen - r.extlen - r.keylen;
  if (in.size() < head) return 0;
  r.extras = in.substr(kHeader, r.extlen);
  r.key = in.substr(kHeader + r.extlen, r.keylen);
  const bool stores = r.op == kSet || r.op == kAdd || r.op == kReplace || r.op == kAppend ||
                      r.op == kPrepend;
  if (!stores || value_len > cache_->options().item_max) {
    // No value to keep (stat's, the only other opcode that may carry one,
    // is ignored), or one too large: read past, never buffered.
    if (stores) {
      info_->prefixes.record_set(r.key);
      bin_too_large(r, out);
    } else {
      bin_dispatch(r, out);
    }
    swallow_ = value_len;
    return head;
  }
  if (in.size() - head < value_len) return 0;
  r.value = in.substr(head, value_len);
  bin_dispatch(r, out);
  return head + value_len;
}

bool Session::known(uint8_t op) {
  switch (op) {
    case kGet: case kGetK: case kTouch: case kGat: case kGatK: case kSet: case kAdd:
    case kReplace: case kAppend: case kPrepend: case kDelete: case kIncr: case kDecr:
    case kQuit: case kFlush: case kNoop: case kVersion: case kStat:
      return true;
    default:
      return false;
  }
}

size_t Session::bin_protocol_error(const BinRequest& r, std::string* out, size_t used) {
  bin_error(r, kInvalid, out);
  closing_ = true;
  return used;
}

// The lengths memcached requires of each opcode (of its loud form).
bool Session::bin_valid(const BinRequest& r) const {
  const bool no_value = r.bodylen == uint32_t{r.extlen} + r.keylen;
  switch (r.op) {
    case kVersion:
    case kNoop:
    case kQuit:
      return r.extlen == 0 && r.keylen == 0 && r.bodylen == 0;
    case kFlush:
      return r.keylen == 0 && no_value && (r.extlen == 0 || r.extlen == 4);
    case kSet:
    case kAdd:
    case kReplace:
      return r.extlen == 8 && r.keylen != 0;
    case kGet:
    case kGetK:
    case kDelete:
      return r.extlen == 0 && r.keylen != 0 && no_value;
    case kIncr:
    case kDecr:
      return r.extlen == 20 && r.keylen != 0 && no_value;
    case kAppend:
    case kPrepend:
      return r.extlen == 0 && r.keylen != 0;
    case kStat:
      return r.extlen == 0;
    case kTouch:
    case kGat:
    case kGatK:
      return r.extlen == 4 && r.keylen != 0 && no_value;
    default:
      return false;
  }
}

void Session::bin_too_large(const BinRequest& r, std::string* out) {
  // As memcached: a set that cannot be stored removes the old value.
  if (r.op == kSet) {
    Result<DeleteResult> d = cache_->remove(r.key);
    if (!d.ok()) return bin_error(r, kInternalError, out, d.status().message());
    if (*d == DeleteResult::kDeleted) wrote_ = true;
  }
  bin_error(r, kTooBig, out);
}

void Session::bin_dispatch(const BinRequest& r, std::string* out) {
  switch (r.op) {
    case kGet:
    case kGetK:
    case kTouch:
    case kGat:
    case kGatK:
      return bin_get(r, out);
    case kSet:
    case kAdd:
    case kReplace:
    case kAppend:
    case kPrepend:
      return bin_store(r, out);
    case kDelete: {
      info_->prefixes.record_delete(r.key);
      std::optional<uint64_t> cas;
      if (r.cas != 0) cas = r.cas;
      Result<DeleteResult> d = cache_->remove(r.key, cas);
      if (!d.ok()) return bin_error(r, kInternalError, out, d.status().message());
      if (*d == DeleteResult::kNotFound) return bin_error(r, kKeyNotFound, out);
      if (*d == DeleteResult::kExists) return bin_error(r, kKeyExists, out);
      wrote_ = true;
      if (!r.quiet) bin_reply(r, kOk, {}, {}, {}, 0, out);
      return;
    }
    case kIncr:
    case kDecr:
      return bin_delta(r, out);
    case kQuit:
      if (!r.quiet) bin_reply(r, kOk, {}, {}, {}, 0, out);
      closing_ = true;
      return;
    case kFlush: {
      const int64_t delay = r.extlen == 4 ? int64_t{get_be(r.extras.data(), 4)} : 0;
      Status s = cache_->flush_all(delay);
      if (!s.ok()) return bin_error(r, kInternalError, out, s.message());
      wrote_ = true;
      if (!r.quiet) bin_reply(r, kOk, {}, {}, {}, 0, out);
      return;
    }
    case kNoop:
      return bin_reply(r, kOk, {}, {}, {}, 0, out);
    case kVersion:
      return bin_reply(r, kOk, {}, {}, info_->version, 0, out);
    case kStat:
      return bin_stat(r, out);
    default:  // (known() let none other through)
      return bin_error(r, kUnknownCommand, out);
  }
}

void Session::bin_get(const BinRequest& r, std::string* out) {
  const bool touch = r.op == kTouch || r.op == kGat || r.op == kGatK;
  const bool with_key = r.op == kGetK || r.op == kGatK;
  // The expiry is unsigned here (memcached reads it so): never "expired".
  const int64_t exptime = touch ? int64_t{get_be(r.extras.data(), 4)} : 0;
  Item it;
  Result<bool> found = cache_->get(r.key, &it, touch ? &exptime : nullptr);
  info_->prefixes.record_get(r.key, found.ok() && *found);
  if (!found.ok()) return bin_error(r, kInternalError, out, found.status().message());
  if (!*found) {
    if (r.quiet) return;
    if (with_key) return bin_reply(r, kKeyNotFound, {}, r.key, {}, 0, out);
    return bin_error(r, kKeyNotFound, out);
  }
  if (touch) wrote_ = true;
  std::string flags;
  put_be(&flags, it.flags, 4);
  bin_reply(r, kOk, flags, with_key ? r.key : std::string_view(),
            r.op == kTouch ? std::string_view() : std::string_view(it.data), it.cas, out);
}

void Session::bin_store(const BinRequest& r, std::string* out) {
  uint32_t flags = 0;
  int64_t exptime = 0;
  StoreMode mode = r.op == kAppend    ? StoreMode::kAppend
                   : r.op == kPrepend ? StoreMode::kPrepend
                   : r.op == kAdd     ? StoreMode::kAdd
                   : r.op == kReplace ? StoreMode::kReplace
                                      : StoreMode::kSet;
  if (r.extlen == 8) {
    flags = get_be(r.extras.data(), 4);
    exptime = get_be(r.extras.data() + 4, 4);
  }
  std::optional<uint64_t> cas;
  if (r.cas != 0) {
    cas = r.cas;
    // memcached: a set, add or replace with a CAS is a cas.
    if (mode != StoreMode::kAppend && mode != StoreMode::kPrepend) mode = StoreMode::kCas;
  }
  info_->prefixes.record_set(r.key);
  uint64_t new_cas = 0;
  Result<StoreResult> s = cache_->store(mode, r.key, flags, exptime, r.value, cas, &new_cas);
  if (!s.ok()) return bin_error(r, kInternalError, out, s.status().message());
  switch (*s) {
    case StoreResult::kStored:
      wrote_ = true;
      if (!r.quiet) bin_reply(r, kOk, {}, {}, {}, new_cas, out);
      return;
    case StoreResult::kExists:
      return bin_error(r, kKeyExists, out);
    case StoreResult::kNotFound:
      return bin_error(r, kKeyNotFound, out);
    case StoreResult::kTooLarge:  // (a value under -I whose item is not)
      return bin_too_large(r, out);
    case StoreResult::kNoMemory:
      wrote_ = true;  // a set then removed the old value
      return bin_error(r, kOutOfMemory, out, "Out of memory allocating item");
    case StoreResult::kNotStored:
      // As memcached: an add finds the key there, a replace does not.
      return bin_error(r, r.op == kAdd       ? kKeyExists
                          : r.op == kReplace ? kKeyNotFound
                                             : kNotStoredStatus,
                       out);
  }
}

void Session::bin_delta(const BinRequest& r, std::string* out) {
  const uint64_t by = get_be64(r.extras.data());
  const uint64_t initial = get_be64(r.extras.data() + 8);
  const uint32_t exptime = get_be(r.extras.data() + 16, 4);
  DeltaOptions o;
  if (r.cas != 0) o.compare_cas = r.cas;
  // An expiry of all ones: a missing item is not created.
  o.vivify = exptime != 0xffffffffu;
  o.vivify_exptime = exptime;
  o.initial = initial;
  uint64_t value = 0;
  Item it;
  Result<DeltaResult> d = cache_->delta(r.key, r.op == kIncr, by, &value, o, &it);
  if (!d.ok()) return bin_error(r, kInternalError, out, d.status().message());
  switch (*d) {
    case DeltaResult::kOk:
    case DeltaResult::kCreated: {
      wrote_ = true;
      if (r.quiet) return;
      std::string v;
      put_be(&v, value, 8);
      return bin_reply(r, kOk, {}, {}, v, it.cas, out);
    }
    case DeltaResult::kNotFound:
      return bin_error(r, kKeyNotFound, out);
    case DeltaResult::kNonNumeric:
      return bin_error(r, kNonNumericValue, out);
    case DeltaResult::kExists:
      return bin_error(r, kKeyExists, out);
    case DeltaResult::kNoMemory:
      return bin_error(r, kOutOfMemory, out, "Out of memory incrementing value");
  }
}

// stat [group]: one reply per statistic (its name the key, its value the
// value), then one with neither. The groups are memcached's binary ones:
// none (the general figures), items, slabs, sizes, and those memcached
// tells by their start: reset, settings, detail on|off|dump. Each but
// detail dump is made by the text protocol's stats, whose lines hold no
// client bytes; detail dump's prefixes are clients' keys, which may hold
// line ends, so its dump goes whole as one reply, as memcached's.
void Session::bin_stat(const BinRequest& r, std::string* out) {
  const std::string_view group = r.key;
  std::string text;
  if (group.starts_with("detail")) {
    const std::string_view what = group.substr(6);
    if (what.starts_with(" dump")) {
      info_->prefixes.dump(&text);
      bin_reply(r, kOk, {}, "detailed", text, 0, out);
      return bin_reply(r, kOk, {}, {}, {}, 0, out);
    }
    if (!what.starts_with(" on") && !what.starts_with(" off")) {
      return bin_error(r, kKeyNotFound, out);
    }
    info_->prefixes.enable(what.starts_with(" on"));
    return bin_reply(r, kOk, {}, {}, {}, 0, out);
  }
  std::string line;
  if (group.empty()) {
    line = "stats";
  } else if (group.starts_with("reset")) {
    line = "stats reset";
  } else if (group.starts_with("settings")) {
    line = "stats settings";
  } else if (group == "items" || group == "slabs" || group == "sizes") {
    line = "stats " + std::string(group);
  } else {
    return bin_error(r, kKeyNotFound, out);  // no such group, as memcached
  }
  const bool saved = noreply_;
  noreply_ = false;
  command(line, &text);
  noreply_ = saved;
  for (size_t at = 0; at < text.size();) {
    const size_t nl = std::min(text.find("\r\n", at), text.size());
    const std::string_view stat = std::string_view(text).substr(at, nl - at);
    at = nl + 2;
    if (!stat.starts_with("STAT ")) continue;  // END, RESET
    const std::string_view rest = stat.substr(5);
    const size_t sp = std::min(rest.find(' '), rest.size());
    bin_reply(r, kOk, {}, rest.substr(0, sp), sp < rest.size() ? rest.substr(sp + 1) : "", 0,
              out);
  }
  bin_reply(r, kOk, {}, {}, {}, 0, out);
}

}  // namespace pmcached
