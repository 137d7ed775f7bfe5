// Publishing a file that was built under a temporary name: a crash leaves
// no file at the final path, or a whole one. Used by container create, the
// version tree's create and `pm kv salvage`.
#ifndef LIBPM_PUBLISH_H_
#define LIBPM_PUBLISH_H_

#include <string>

#include "pm/status.h"

namespace pm {

// fsync(2) of the directory holding `path`: makes a rename or create there
// durable.
Status fsync_dir_of(const std::string& path);

// Renames tmp to path unless path exists (then kInvalidArgument), and makes
// the rename durable.
Status publish(const std::string& tmp, const std::string& path);

}  // namespace pm

#endif  // LIBPM_PUBLISH_H_
