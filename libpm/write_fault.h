// WriteFaultRouter: one process-wide SIGSEGV handler that routes write faults
// in registered regions (read-only mappings a tracker watches) to their
// owner, and chains every other fault to the previously installed action, so
// it cooperates with sanitizers and runtimes that rely on SIGSEGV.
#ifndef LIBPM_WRITE_FAULT_H_
#define LIBPM_WRITE_FAULT_H_

#include <cstdint>

#include "pm/status.h"

namespace pm {

class WriteFaultSink {
 public:
  // Called in signal context: async-signal-safe code only. Must make the
  // faulting address writable (or the access faults again).
  virtual void on_write_fault(uintptr_t addr) = 0;

 protected:
  ~WriteFaultSink() = default;
};

// A registered region [begin, end); end moves as the region grows.
class WriteFaultRegion {
 public:
  WriteFaultRegion() = default;
  ~WriteFaultRegion();
  WriteFaultRegion(const WriteFaultRegion&) = delete;
  WriteFaultRegion& operator=(const WriteFaultRegion&) = delete;

  // Installs the handler on first use. kBusy when 64 regions are registered.
  Status attach(uintptr_t begin, WriteFaultSink* sink);
  void set_end(uintptr_t end);

 private:
  int slot_ = -1;
};

}  // namespace pm

#endif  // LIBPM_WRITE_FAULT_H_
