// AddressReservation: a range of virtual addresses owned by one container,
// reserved PROT_NONE so that nothing else is placed there, into which the
// working view is mapped at fixed addresses.
#ifndef LIBPM_ADDRESS_SPACE_H_
#define LIBPM_ADDRESS_SPACE_H_

#include <cstddef>
#include <cstdint>

#include "pm/status.h"

namespace pm {

class AddressReservation {
 public:
  AddressReservation() = default;
  AddressReservation(AddressReservation&& o) noexcept {
    *this = static_cast<AddressReservation&&>(o);
  }
  AddressReservation& operator=(AddressReservation&& o) noexcept;
  ~AddressReservation();

  // Reserves exactly [addr, addr+len); kBusy if any of it is in use.
  static Result<AddressReservation> at(uint64_t addr, uint64_t len);
  // Reserves a 1 GiB-aligned range at a random address far from where the
  // kernel places ordinary mappings (and inside sanitizer application memory).
  static Result<AddressReservation> anywhere(uint64_t len);

  std::byte* base() const { return base_; }
  uint64_t size() const { return len_; }

  // Maps [file_off, file_off+len) of fd privately (copy-on-write) at
  // base+off, replacing the reservation there.
  Status map_private(uint64_t off, uint64_t len, int fd, uint64_t file_off);

 private:
  std::byte* base_ = nullptr;
  uint64_t len_ = 0;
};

}  // namespace pm

#endif  // LIBPM_ADDRESS_SPACE_H_
