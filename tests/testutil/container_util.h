// Helpers for tests that open containers.
#ifndef TESTUTIL_CONTAINER_UTIL_H_
#define TESTUTIL_CONTAINER_UTIL_H_

#include <gtest/gtest.h>

#include <memory>

#include "pm/container.h"

namespace pm::test {

// The container, or nullptr with a test failure that shows the status.
inline std::unique_ptr<Container> must(Result<std::unique_ptr<Container>> r) {
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  return r.ok() ? std::move(*r) : nullptr;
}

// Options for a small container: 4 MiB heap, room to grow to 4 GiB.
inline Options small() {
  Options o;
  o.initial_size = 4 << 20;
  o.max_size = 4ull << 30;
  return o;
}

}  // namespace pm::test

#endif  // TESTUTIL_CONTAINER_UTIL_H_
