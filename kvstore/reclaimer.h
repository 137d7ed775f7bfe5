// Epoch-based reclamation: a thread inside a Reclaimer::Guard may follow
// pointers to frontend items and tables that writers unlink meanwhile;
// retire() frees them only after every thread that was inside a guard when
// they were unlinked has left it. Process-wide (one domain for all stores).
//
// Thread safety: every function, from any thread. Guards nest; a thread
// may retire inside its own guard.
#ifndef KVSTORE_RECLAIMER_H_
#define KVSTORE_RECLAIMER_H_

#include <cstdint>

namespace kv {

class Reclaimer {
 public:
  using Deleter = void (*)(void*);

  class Guard {
   public:
    Guard();
    ~Guard();
    Guard(const Guard&) = delete;
    Guard& operator=(const Guard&) = delete;
  };

  // Frees p with fn once no thread can still hold it.
  static void retire(void* p, Deleter fn);
  // Frees whatever can be freed now (tests, shutdown); returns the number
  // still waiting.
  static uint64_t collect();
};

}  // namespace kv

#endif  // KVSTORE_RECLAIMER_H_
