#include "libpm/address_space.h"

#include <sys/mman.h>

#include <cerrno>
#include <random>
#include <sstream>

namespace pm {

namespace {

constexpr uint64_t kAlign = 1ull << 30;

// Candidate ranges. Under ThreadSanitizer only a few ranges are application
// memory; elsewhere 32-80 TiB is clear of the binary, the brk heap, the
// mmap area (just below the stack, ~127 TiB) and ASan's shadow (< 16 TiB).
#if defined(__SANITIZE_THREAD__)
constexpr uint64_t kLo = 0x0010'0000'0000ull, kHi = 0x0070'0000'0000ull;
#else
constexpr uint64_t kLo = 0x2000'0000'0000ull, kHi = 0x5000'0000'0000ull;
#endif

std::string hex(uint64_t v) {
  std::ostringstream o;
  o << "0x" << std::hex << v;
  return o.str();
}

}  // namespace

AddressReservation& AddressReservation::operator=(AddressReservation&& o) noexcept {
  if (this != &o) {
    if (base_ != nullptr) ::munmap(base_, len_);
    base_ = o.base_;
    len_ = o.len_;
    o.base_ = nullptr;
    o.len_ = 0;
  }
  return *this;
}

AddressReservation::~AddressReservation() {
  if (base_ != nullptr) ::munmap(base_, len_);
}

Result<AddressReservation> AddressReservation::at(uint64_t addr, uint64_t len) {
  void* p = ::mmap(reinterpret_cast<void*>(addr), len, PROT_NONE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
  if (p == MAP_FAILED || p != reinterpret_cast<void*>(addr)) {
    int err = errno;
    if (p != MAP_FAILED) ::munmap(p, len);  // kernels before 4.17 ignore NOREPLACE
    if (err == EEXIST || p != MAP_FAILED) {
      return Status::busy("address range " + hex(addr) + "-" + hex(addr + len) +
                          " that this container is mapped at is already in use in this "
                          "process (another container, or a mapping)");
    }
    return Status::from_errno("reserve " + std::to_string(len >> 20) + " MiB at " + hex(addr), err);
  }
  AddressReservation r;
  r.base_ = static_cast<std::byte*>(p);
  r.len_ = len;
  return r;
}

Result<AddressReservation> AddressReservation::anywhere(uint64_t len) {
  std::random_device rd;
  std::mt19937_64 rng((uint64_t{rd()} << 32) ^ rd());
  if (len > kHi - kLo) return Status::invalid_argument("max_size too large to reserve");
  uint64_t slots = (kHi - kLo - len) / kAlign + 1;
  Status last;
  for (int attempt = 0; attempt < 64; attempt++) {
    uint64_t addr = kLo + (rng() % slots) * kAlign;
    Result<AddressReservation> r = at(addr, len);
    if (r.ok()) return r;
    last = r.status();
  }
  return last;
}

Status AddressReservation::map_private(uint64_t off, uint64_t len, int fd, uint64_t file_off) {
  void* p = ::mmap(base_ + off, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_FIXED, fd,
                   static_cast<off_t>(file_off));
  if (p == MAP_FAILED) return Status::from_errno("map working view", errno);
  return Status();
}

}  // namespace pm
