#include "kvstore/crl.h"

#include <gtest/gtest.h>

#include <cstring>

#include "testutil/container_util.h"
#include "testutil/temp_dir.h"

namespace kv {
namespace {

class CrlTest : public ::testing::Test {
 protected:
  void SetUp() override {
    pm::Options o = pm::test::small();
    o.raw_bytes = 8192;
    c_ = pm::test::must(pm::Container::create(dir_.file("c.pm"), o));
    ASSERT_TRUE(c_ != nullptr);
    limits_ = {64, 1024, 4096};
  }
  pm::test::TempDir dir_;
  std::unique_ptr<pm::Container> c_;
  Limits limits_;
};

TEST_F(CrlTest, RecordRoundTripsAcrossTheRingsEnd) {
  Log log(&c_->raw(), 3, 4096, 4096);
  const std::string value(300, 'v');
  std::vector<Op> ops{{OpCode::kPut, "key-one", value}, {OpCode::kRemove, "key-two", ""}};
  std::vector<std::byte> buf;
  const uint64_t pos = 3 * 4096 + 4000;  // third lap, 96 bytes before the end
  encode_record(3, pos, 42, 7, ops, &buf);
  ASSERT_EQ(buf.size() % 8, 0u);
  ASSERT_TRUE(log.write(pos, buf.data(), buf.size()).ok());
  ASSERT_TRUE(log.persist(pos, buf.size()).ok());
  Record r;
  ASSERT_TRUE(log.read(pos, limits_, &r));
  EXPECT_EQ(r.header.seq, 42u);
  EXPECT_EQ(r.header.session, 7u);
  ASSERT_EQ(r.ops.size(), 2u);
  EXPECT_EQ(r.ops[0].key, "key-one");
  EXPECT_EQ(r.ops[0].value, value);
  EXPECT_EQ(r.ops[1].op, OpCode::kRemove);
  uint64_t seq = 0;
  EXPECT_TRUE(log.peek_seq(pos, &seq));
  EXPECT_EQ(seq, 42u);
  // The same bytes one lap later (or earlier) are not a record there.
  EXPECT_FALSE(log.read(pos + 4096, limits_, &r));
  EXPECT_FALSE(log.read(pos - 4096, limits_, &r));
}

TEST_F(CrlTest, AnyFlippedByteOrWrongLogInvalidatesTheRecord) {
  Log log(&c_->raw(), 0, 0, 4096);
  Log other(&c_->raw(), 1, 0, 4096);  // same bytes, another log number
  std::vector<Op> ops{{OpCode::kPut, "k", "value"}};
  std::vector<std::byte> buf;
  encode_record(0, 64, 1, 1, ops, &buf);
  Record r;
  for (size_t i = 0; i < buf.size(); i++) {
    std::vector<std::byte> bad = buf;
    bad[i] ^= std::byte{0x10};
    ASSERT_TRUE(log.write(64, bad.data(), bad.size()).ok());
    EXPECT_FALSE(log.read(64, limits_, &r)) << "flipped byte " << i;
  }
  ASSERT_TRUE(log.write(64, buf.data(), buf.size()).ok());
  EXPECT_TRUE(log.read(64, limits_, &r));
  EXPECT_FALSE(other.read(64, limits_, &r));
}

TEST_F(CrlTest, LimitsRefuseOversizedRecordsEvenWithAGoodChecksum) {
  Log log(&c_->raw(), 0, 0, 4096);
  const std::string key(65, 'k');
  std::vector<Op> ops{{OpCode::kPut, key, "v"}};
  std::vector<std::byte> buf;
  encode_record(0, 0, 1, 1, ops, &buf);
  ASSERT_TRUE(log.write(0, buf.data(), buf.size()).ok());
  Record r;
  EXPECT_FALSE(log.read(0, limits_, &r));  // key over max_key
  Limits wide = limits_;
  wide.max_key = 100;
  EXPECT_TRUE(log.read(0, wide, &r));
  // Zeroed space (a never-written log) is no record.
  std::vector<std::byte> zero(256);
  ASSERT_TRUE(log.write(512, zero.data(), zero.size()).ok());
  EXPECT_FALSE(log.read(512, wide, &r));
}

}  // namespace
}  // namespace kv
