#include "fuse/errno_map.h"

#include <cerrno>

namespace pmfs {

int to_errno(const pm::Status& s) {
  switch (s.code()) {
    case pm::Code::kOk:
      return 0;
    case pm::Code::kNotFound:
      return ENOENT;
    case pm::Code::kInvalidArgument:
      return EINVAL;
    case pm::Code::kNoSpace:
      return ENOSPC;
    case pm::Code::kBusy:
      return EBUSY;
    case pm::Code::kNotSupported:
      return ENOTSUP;
    case pm::Code::kReadOnly:
      return EROFS;
    case pm::Code::kCorruption:
    case pm::Code::kIOError:
      return EIO;
  }
  return EIO;
}

}  // namespace pmfs
