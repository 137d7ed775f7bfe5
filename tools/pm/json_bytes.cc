#include "pm/json_bytes.h"

#include <cstdint>

namespace pm::cli {

namespace {
constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

int sextet(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}
}  // namespace

bool valid_utf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t n;
    uint32_t cp;
    if (c < 0x80) {
      i++;
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      n = 1, cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      n = 2, cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      n = 3, cp = c & 0x07;
    } else {
      return false;
    }
    if (i + n >= s.size()) return false;  // truncated sequence
    for (size_t k = 1; k <= n; k++) {
      const auto d = static_cast<unsigned char>(s[i + k]);
      if ((d & 0xC0) != 0x80) return false;
      cp = cp << 6 | (d & 0x3F);
    }
    // Overlong forms, surrogates and code points past U+10FFFF are not UTF-8.
    static constexpr uint32_t kMin[] = {0, 0x80, 0x800, 0x10000};
    if (cp < kMin[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += n + 1;
  }
  return true;
}

std::string base64_encode(std::string_view s) {
  std::string out;
  out.reserve((s.size() + 2) / 3 * 4);
  for (size_t i = 0; i < s.size(); i += 3) {
    uint32_t v = static_cast<unsigned char>(s[i]) << 16;
    if (i + 1 < s.size()) v |= static_cast<unsigned char>(s[i + 1]) << 8;
    if (i + 2 < s.size()) v |= static_cast<unsigned char>(s[i + 2]);
    out += kAlphabet[v >> 18 & 63];
    out += kAlphabet[v >> 12 & 63];
    out += i + 1 < s.size() ? kAlphabet[v >> 6 & 63] : '=';
    out += i + 2 < s.size() ? kAlphabet[v & 63] : '=';
  }
  return out;
}

bool base64_decode(std::string_view s, std::string* out) {
  if (s.size() % 4 != 0) return false;
  out->clear();
  for (size_t i = 0; i < s.size(); i += 4) {
    const bool last = i + 4 == s.size();
    const int pad = last ? (s[i + 3] == '=') + (s[i + 2] == '=') : 0;
    if (pad == 1 && s[i + 2] == '=') return false;
    uint32_t v = 0;
    for (int k = 0; k < 4; k++) {
      const int x = k >= 4 - pad ? 0 : sextet(s[i + k]);
      if (x < 0) return false;
      v = v << 6 | static_cast<uint32_t>(x);
    }
    *out += static_cast<char>(v >> 16);
    if (pad < 2) *out += static_cast<char>(v >> 8 & 0xFF);
    if (pad < 1) *out += static_cast<char>(v & 0xFF);
  }
  return true;
}

void put_bytes(nlohmann::json& obj, const std::string& name, std::string_view bytes) {
  if (valid_utf8(bytes)) {
    obj[name] = std::string(bytes);
  } else {
    obj[name + "_base64"] = base64_encode(bytes);
  }
}

Status get_bytes(const nlohmann::json& obj, const std::string& name, std::string* out) {
  const auto plain = obj.find(name);
  if (plain != obj.end() && plain->is_string()) {
    *out = plain->get<std::string>();
    return Status();
  }
  const auto b64 = obj.find(name + "_base64");
  if (b64 != obj.end() && b64->is_string()) {
    if (base64_decode(b64->get<std::string>(), out)) return Status();
    return Status::invalid_argument("\"" + name + "_base64\" is not valid base64");
  }
  return Status::invalid_argument("expected a string \"" + name + "\" or \"" + name + "_base64\"");
}

}  // namespace pm::cli
