#include "bench/alloc/alloc_engine_boost.h"

#include <sys/stat.h>

#include <boost/interprocess/managed_mapped_file.hpp>
#include <cerrno>
#include <exception>
#include <new>

namespace pm::bench {

namespace bip = boost::interprocess;

struct BoostAllocEngine::Segment {
  bip::managed_mapped_file file;
};

BoostAllocEngine::BoostAllocEngine(const std::string& path) : file_(path) {}

BoostAllocEngine::~BoostAllocEngine() = default;

Result<std::unique_ptr<BoostAllocEngine>> BoostAllocEngine::create(const std::string& path,
                                                                   uint64_t size) {
  std::unique_ptr<BoostAllocEngine> e(new BoostAllocEngine(path));
  try {
    e->segment_.reset(new Segment{bip::managed_mapped_file(bip::create_only, path.c_str(), size)});
  } catch (const std::exception& ex) {
    return Status::io_error("boost managed_mapped_file " + path + ": " + ex.what());
  }
  return e;
}

// Boost can only extend a file that nobody maps: unmap, extend by the
// current size, map again. Handles are offsets, so they stay valid.
Status BoostAllocEngine::grow() {
  const std::string& path = file_.path();
  const uint64_t extra = segment_->file.get_size();
  segment_.reset();
  try {
    if (!bip::managed_mapped_file::grow(path.c_str(), extra)) {
      return Status::no_space("boost managed_mapped_file::grow " + path + " failed");
    }
    segment_.reset(new Segment{bip::managed_mapped_file(bip::open_only, path.c_str())});
  } catch (const std::exception& ex) {
    return Status::io_error("boost managed_mapped_file grow " + path + ": " + ex.what());
  }
  grows_++;
  return Status();
}

Result<uint64_t> BoostAllocEngine::alloc(size_t n) {
  void* p = segment_->file.allocate(n, std::nothrow);
  while (p == nullptr) {
    PM_TRY(grow());
    p = segment_->file.allocate(n, std::nothrow);
  }
  return static_cast<uint64_t>(segment_->file.get_handle_from_address(p));
}

// Handle 0 would be the segment's own header: never an object.
Status BoostAllocEngine::free(uint64_t handle) {
  if (handle != 0) segment_->file.deallocate(address(handle));
  return Status();
}

std::byte* BoostAllocEngine::address(uint64_t handle) {
  using Handle = bip::managed_mapped_file::handle_t;
  return static_cast<std::byte*>(
      segment_->file.get_address_from_handle(static_cast<Handle>(handle)));
}

Result<Usage> BoostAllocEngine::usage() {
  struct stat st;
  if (::stat(file_.path().c_str(), &st) != 0) {
    return Status::from_errno("stat " + file_.path(), errno);
  }
  const bip::managed_mapped_file& f = segment_->file;
  return Usage{f.get_size() - f.get_free_memory(), static_cast<uint64_t>(st.st_blocks) * 512};
}

}  // namespace pm::bench
