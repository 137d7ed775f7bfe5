#include "pm/status.h"

#include <cstring>

namespace pm {

namespace {
const char* code_name(Code c) {
  switch (c) {
    case Code::kOk:
      return "OK";
    case Code::kNotFound:
      return "Not found";
    case Code::kInvalidArgument:
      return "Invalid argument";
    case Code::kCorruption:
      return "Corruption";
    case Code::kIOError:
      return "IO error";
    case Code::kBusy:
      return "Busy";
    case Code::kNoSpace:
      return "No space";
    case Code::kNotSupported:
      return "Not supported";
    case Code::kReadOnly:
      return "Read-only";
  }
  return "Unknown";
}
}  // namespace

Status Status::from_errno(std::string what, int err) {
  Code code = Code::kIOError;
  if (err == ENOENT) code = Code::kNotFound;
  if (err == ENOSPC || err == ENOMEM || err == EDQUOT || err == EFBIG) code = Code::kNoSpace;
  if (err == EWOULDBLOCK || err == EBUSY || err == EEXIST) code = Code::kBusy;
  if (err == EINVAL || err == EISDIR) code = Code::kInvalidArgument;  // a directory for a file
  if (err == ENOSYS || err == EOPNOTSUPP) code = Code::kNotSupported;
  if (err == EROFS) code = Code::kReadOnly;
  return Status(code, what + ": " + std::strerror(err));
}

std::string Status::to_string() const {
  if (ok()) return "OK";
  return std::string(code_name(code_)) + ": " + msg_;
}

Status Status::with_context(std::string_view context) const {
  if (ok()) return *this;
  // Name each thing once: "open X" adds nothing to "open X: ...", and only
  // its verb to "X: ..." (layers that each name the path they work on).
  const std::string_view m = msg_;
  auto begins = [&](std::string_view head) {
    return !head.empty() && m.starts_with(head) && m.substr(head.size()).starts_with(": ");
  };
  if (begins(context)) return *this;
  const size_t sp = context.rfind(' ');
  if (sp != std::string_view::npos && begins(context.substr(sp + 1))) {
    return Status(code_, std::string(context) + std::string(m.substr(context.size() - sp - 1)));
  }
  return Status(code_, std::string(context) + ": " + msg_);
}

}  // namespace pm
