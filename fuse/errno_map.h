// The one mapping from pm::Status to the errno a FUSE reply carries.
#ifndef PMFS_ERRNO_MAP_H_
#define PMFS_ERRNO_MAP_H_

#include "pm/status.h"

namespace pmfs {

// 0 for OK. kNotFound ENOENT, kInvalidArgument EINVAL, kNoSpace ENOSPC,
// kBusy EBUSY, kNotSupported ENOTSUP, kCorruption and kIOError EIO. Callers
// that know more (a put refused for its size is EFBIG) map before calling.
int to_errno(const pm::Status& s);

}  // namespace pmfs

#endif  // PMFS_ERRNO_MAP_H_
