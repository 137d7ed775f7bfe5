#include <gtest/gtest.h>

#include "testutil/temp_dir.h"

extern "C" int c_api_roundtrip(const char* path);

TEST(CApiTest, RoundTripFromC) {
  pm::test::TempDir dir;
  EXPECT_EQ(c_api_roundtrip(dir.file("c.pm").c_str()), 0);
}
