// Keys and values in JSON without loss: a byte string that is valid UTF-8 is
// the field itself ("key": "..."); any other is its base64 under the name
// with "_base64" appended ("key_base64": "..."). What `pm kv get/ls --json`
// print and `pm kv load --format jsonl|json` read, so any bytes round-trip.
#ifndef TOOLS_PM_JSON_BYTES_H_
#define TOOLS_PM_JSON_BYTES_H_

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "pm/status.h"

namespace pm::cli {

bool valid_utf8(std::string_view s);
std::string base64_encode(std::string_view s);
// False on a character outside the alphabet or a bad length.
bool base64_decode(std::string_view s, std::string* out);

// obj[name] = bytes, or obj[name + "_base64"] = base64(bytes).
void put_bytes(nlohmann::json& obj, const std::string& name, std::string_view bytes);
// The field written by put_bytes; kInvalidArgument naming it when missing
// or malformed.
Status get_bytes(const nlohmann::json& obj, const std::string& name, std::string* out);

}  // namespace pm::cli

#endif  // TOOLS_PM_JSON_BYTES_H_
