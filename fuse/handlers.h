// The FUSE low-level operations of a mount: each sfs_* handler calls the
// matching Fs::do_* and replies exactly once (forget replies none).
#ifndef PMFS_HANDLERS_H_
#define PMFS_HANDLERS_H_

#include "fuse/fs.h"

namespace pmfs {

// Every operation the mount implements; the userdata of the session must be
// the Fs.
fuse_lowlevel_ops make_operations();

}  // namespace pmfs

#endif  // PMFS_HANDLERS_H_
