#include <gtest/gtest.h>

#include "testutil/temp_dir.h"

extern "C" int kv_c_api_roundtrip(const char* path);

TEST(KvCApiTest, RoundTripFromC) {
  pm::test::TempDir dir;
  EXPECT_EQ(kv_c_api_roundtrip(dir.file("c.kv").c_str()), 0);
}
