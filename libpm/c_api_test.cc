#include <gtest/gtest.h>

#include "testutil/temp_dir.h"

extern "C" int c_api_roundtrip(const char* path);
extern "C" int c_api_data_blocks(const char* path);

TEST(CApiTest, RoundTripFromC) {
  pm::test::TempDir dir;
  EXPECT_EQ(c_api_roundtrip(dir.file("c.pm").c_str()), 0);
}

TEST(CApiTest, DataBlocksFromC) {
  pm::test::TempDir dir;
  EXPECT_EQ(c_api_data_blocks(dir.file("d.pm").c_str()), 0);
}

extern "C" int c_api_inspect(const char* path);

TEST(CApiTest, InfoCheckAndCollectFromC) {
  pm::test::TempDir dir;
  EXPECT_EQ(c_api_inspect(dir.file("i.pm").c_str()), 0);
}

extern "C" int c_api_misuse(const char* path);

TEST(CApiTest, MisuseFromCIsAnErrorNotACrash) {
  pm::test::TempDir dir;
  EXPECT_EQ(c_api_misuse(dir.file("m.pm").c_str()), 0);
}

extern "C" int c_api_blocks_and_raw(const char* path);

TEST(CApiTest, BlocksGrowthGenerationAndTheRawRegionFromC) {
  pm::test::TempDir dir;
  EXPECT_EQ(c_api_blocks_and_raw(dir.file("b.pm").c_str()), 0);
}
