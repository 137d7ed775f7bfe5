#include "fuse/file_content.h"

#include <gtest/gtest.h>

#include "fuse/key_names.h"

namespace pmfs {
namespace {

TEST(FileContentTest, ChunkKeysSortByIdAndParseBack) {
  EXPECT_LT(chunk_key(255), chunk_key(256));
  EXPECT_LT(chunk_key(1), chunk_key(uint64_t{1} << 40));
  for (uint64_t id : {uint64_t{1}, uint64_t{0x0102030405060708}, ~uint64_t{0}}) {
    EXPECT_EQ(chunk_id(chunk_key(id)), id);
  }
  EXPECT_FALSE(chunk_id(std::string(kMetaPrefix) + "12345678"));  // another record
  EXPECT_FALSE(chunk_id(chunk_key(7) + "x"));                     // wrong length
}

TEST(FileContentTest, ManifestRoundTrips) {
  const Manifest m{4096, 3 * 4096 + 1, {11, 0, 12, 13}};  // a hole at chunk 1
  std::optional<Manifest> back = decode_manifest(encode_manifest(m));
  ASSERT_TRUE(back);
  EXPECT_EQ(back->chunk_bytes, 4096u);
  EXPECT_EQ(back->size, m.size);
  EXPECT_EQ(back->ids, m.ids);
}

TEST(FileContentTest, DamagedManifestsAreRefused) {
  const std::string good = encode_manifest(Manifest{4096, 8192, {1, 2}});
  EXPECT_FALSE(decode_manifest(""));
  EXPECT_FALSE(decode_manifest(good.substr(0, good.size() - 8)));  // an id short
  EXPECT_FALSE(decode_manifest(good + std::string(8, '\0')));      // an id too many
  std::string v = good;
  v[0] = 2;  // unknown version
  EXPECT_FALSE(decode_manifest(v));
  v = good;
  put_le(&v, 4, uint32_t{0});  // chunks of no bytes
  EXPECT_FALSE(decode_manifest(v));
}

TEST(FileContentTest, TheChunkedFlagRoundTripsInTheMetadataRecord) {
  Meta m;
  m.mode = 0100644;
  m.chunked = true;
  EXPECT_TRUE(decode_meta(encode_meta(m))->chunked);
  m.chunked = false;
  EXPECT_FALSE(decode_meta(encode_meta(m))->chunked);
}

}  // namespace
}  // namespace pmfs
