#include <gtest/gtest.h>

#include "testutil/temp_dir.h"

extern "C" int kv_c_api_roundtrip(const char* path);

TEST(KvCApiTest, RoundTripFromC) {
  pm::test::TempDir dir;
  EXPECT_EQ(kv_c_api_roundtrip(dir.file("c.kv").c_str()), 0);
}

extern "C" int kv_c_api_txn_cursor_stats(const char* path);

TEST(KvCApiTest, TransactionsCursorsAndStatsFromC) {
  pm::test::TempDir dir;
  EXPECT_EQ(kv_c_api_txn_cursor_stats(dir.file("c.kv").c_str()), 0);
}

extern "C" int kv_c_api_misuse(const char* path);

TEST(KvCApiTest, MisuseFromCIsAnErrorNotACrash) {
  pm::test::TempDir dir;
  EXPECT_EQ(kv_c_api_misuse(dir.file("c.kv").c_str()), 0);
}
