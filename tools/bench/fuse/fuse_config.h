// FuseConfig: the sizes of one `pm bench fuse` run, chosen once from the
// command line (full size or --smoke).
#ifndef TOOLS_BENCH_FUSE_FUSE_CONFIG_H_
#define TOOLS_BENCH_FUSE_FUSE_CONFIG_H_

#include <cstdint>
#include <string>
#include <vector>

namespace pm::bench {

struct FuseConfig {
  // Mount points, the pmfs store and the tmpfs files the passthrough
  // examples serve all go here (created and removed again if missing).
  std::string dir = "/dev/shm/pm-bench-fuse";
  bool smoke = false;

  // Files of the small-file phases (create, stat, read, ls -l, unlink).
  uint64_t files = 10'000;
  uint32_t file_bytes = 100;
  // Directories listed cold (just mounted) and again warm; their files are
  // written behind the mount (into the store or the tmpfs directory), so
  // that a million of them take seconds instead of minutes of FUSE creates.
  std::vector<uint64_t> listings = {10'000, 1'000'000};
  // One file written and read sequentially (MiB).
  uint64_t large_mib = 1024;

  // The pm executable that serves pmfs (`pm mount -f`); empty: this one.
  std::string pm_exe;

  static FuseConfig smoke_sized() {
    FuseConfig c;
    c.smoke = true;
    c.files = 200;
    c.listings = {500};
    c.large_mib = 16;
    return c;
  }
};

}  // namespace pm::bench

#endif  // TOOLS_BENCH_FUSE_FUSE_CONFIG_H_
