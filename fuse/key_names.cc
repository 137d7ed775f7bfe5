#include "fuse/key_names.h"

#include <bit>
#include <cstdint>
#include <cstring>

namespace pmfs {

namespace {

constexpr uint8_t kMetaVersion = 1;
constexpr uint8_t kMetaVersion2 = 2;

constexpr std::string_view kEscape = "%%";

// Can be a file name as it is.
bool nameable(std::string_view c) {
  return !c.empty() && c != "." && c != ".." && c.find('\0') == std::string_view::npos;
}

// The component after kEscape, or nullopt ('%' only in %25 and %00).
std::optional<std::string> unescape(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') {
      out += s[i];
    } else if (s.substr(i, 3) == "%25") {
      out += '%', i += 2;
    } else if (s.substr(i, 3) == "%00") {
      out += '\0', i += 2;
    } else {
      return std::nullopt;
    }
  }
  return out;
}

// `name` stands for another component (see the file comment). Recursive:
// the decoded component is shorter.
bool is_escape(std::string_view name) {
  if (!name.starts_with(kEscape)) return false;
  std::optional<std::string> c = unescape(name.substr(kEscape.size()));
  return c && (!nameable(*c) || is_escape(*c));
}

}  // namespace

std::string encode_name(std::string_view component) {
  if (nameable(component) && !is_escape(component)) return std::string(component);
  std::string out(kEscape);
  for (char c : component) {
    if (c == '%') {
      out += "%25";
    } else if (c == '\0') {
      out += "%00";
    } else {
      out += c;
    }
  }
  return out;
}

std::optional<std::string> decode_name(std::string_view name) {
  if (!nameable(name)) return std::nullopt;
  if (is_escape(name)) return unescape(name.substr(kEscape.size()));
  return std::string(name);
}

std::optional<std::vector<std::string>> key_to_names(std::string_view key) {
  // A first component "" would be the root's "%%", the empty key itself.
  if (!key.empty() && (key[0] == '\0' || key[0] == '/')) return std::nullopt;
  std::vector<std::string> names;
  size_t start = 0;
  for (;;) {
    const size_t slash = key.find('/', start);
    const std::string_view c =
        key.substr(start, slash == std::string_view::npos ? std::string_view::npos : slash - start);
    names.push_back(encode_name(c));
    if (names.back().size() > kNameMax) return std::nullopt;
    if (slash == std::string_view::npos) break;
    start = slash + 1;
  }
  return names;
}

std::string child_key(std::string_view dir, std::string_view component) {
  std::string k;
  k.reserve(dir.size() + 1 + component.size());
  if (!dir.empty()) (k += dir) += '/';
  k += component;
  return k;
}

std::string id_key(std::string_view prefix, uint64_t id) {
  std::string k(prefix);
  for (int shift = 56; shift >= 0; shift -= 8) k += static_cast<char>(id >> shift);
  return k;
}

std::optional<uint64_t> key_id(std::string_view prefix, std::string_view key) {
  if (!key.starts_with(prefix) || key.size() != prefix.size() + 8) return std::nullopt;
  uint64_t id = 0;
  for (size_t i = prefix.size(); i < key.size(); i++) id = id << 8 | static_cast<uint8_t>(key[i]);
  return id;
}

std::string encode_meta(const Meta& m) {
  const bool v2 = m.atime_ns != m.mtime_ns || m.rdev != 0;
  const size_t body = v2 ? kMetaRecordV2Bytes : kMetaRecordBytes;
  std::string r(body + (m.ino != 0 ? sizeof m.ino : 0), '\0');
  r[0] = static_cast<char>(v2 ? kMetaVersion2 : kMetaVersion);
  r[1] = static_cast<char>((m.chunked ? kMetaChunked : 0) | (m.link ? kMetaLink : 0) |
                           (m.ino != 0 ? kMetaIno : 0));
  put_le(&r, 4, m.mode);
  put_le(&r, 8, m.uid);
  put_le(&r, 12, m.gid);
  put_le(&r, 16, m.mtime_ns);
  put_le(&r, 24, m.ctime_ns);
  if (v2) {
    put_le(&r, 32, m.atime_ns);
    put_le(&r, 40, m.rdev);
  }
  if (m.ino != 0) put_le(&r, body, m.ino);
  return r;
}

std::optional<Meta> decode_meta(std::string_view record) {
  if (record.empty()) return std::nullopt;
  const auto version = static_cast<uint8_t>(record[0]);
  const size_t need = version == kMetaVersion    ? kMetaRecordBytes
                      : version == kMetaVersion2 ? kMetaRecordV2Bytes
                                                 : SIZE_MAX;
  if (record.size() < need) return std::nullopt;
  Meta m;
  m.mode = get_le<uint32_t>(record, 4);
  m.uid = get_le<uint32_t>(record, 8);
  m.gid = get_le<uint32_t>(record, 12);
  m.mtime_ns = get_le<int64_t>(record, 16);
  m.ctime_ns = get_le<int64_t>(record, 24);
  m.atime_ns = m.mtime_ns;
  m.chunked = (static_cast<uint8_t>(record[1]) & kMetaChunked) != 0;
  m.link = (static_cast<uint8_t>(record[1]) & kMetaLink) != 0;
  if (version == kMetaVersion2) {
    m.atime_ns = get_le<int64_t>(record, 32);
    m.rdev = get_le<uint64_t>(record, 40);
  }
  // A number out of range is a damaged record's: the mount numbers it.
  if ((static_cast<uint8_t>(record[1]) & kMetaIno) != 0 && record.size() >= need + 8) {
    const auto ino = get_le<uint64_t>(record, need);
    if (ino > 1 && ino < kStableInoEnd) m.ino = ino;
  }
  return m;
}

std::string encode_xattrs(const Xattrs& x) {
  std::string r;
  for (const auto& [name, value] : x) {
    for (std::string_view s : {std::string_view(name), std::string_view(value)}) {
      const size_t off = r.size();
      r.resize(off + 4);
      put_le(&r, off, static_cast<uint32_t>(s.size()));
      r += s;
    }
  }
  return r;
}

std::optional<Xattrs> decode_xattrs(std::string_view record) {
  Xattrs x;
  size_t pos = 0;
  auto field = [&](std::string* out) {
    if (record.size() - pos < 4) return false;
    const uint32_t n = get_le<uint32_t>(record, pos);
    pos += 4;
    if (record.size() - pos < n) return false;
    out->assign(record.substr(pos, n));
    pos += n;
    return true;
  };
  while (pos < record.size()) {
    std::string name, value;
    if (!field(&name) || !field(&value)) return std::nullopt;
    x[std::move(name)] = std::move(value);
  }
  return x;
}

}  // namespace pmfs
