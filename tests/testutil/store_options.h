// The key-value store options most tests start from: two small logs, a
// small heap, limits that fit every test's keys and values, and no
// background threads (the test drives gleaning and epochs: deterministic).
#ifndef TESTUTIL_STORE_OPTIONS_H_
#define TESTUTIL_STORE_OPTIONS_H_

#include "kv/store.h"

namespace pm::test {

inline kv::StoreOptions small_store_options() {
  kv::StoreOptions o;
  o.logs = 2;
  o.log_bytes = 64 << 10;
  o.max_key_bytes = 64;
  o.max_value_bytes = 4096;
  o.initial_heap_bytes = 1 << 20;
  o.max_heap_bytes = 1ull << 30;
  o.background = false;
  return o;
}

}  // namespace pm::test

#endif  // TESTUTIL_STORE_OPTIONS_H_
