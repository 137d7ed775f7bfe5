#include "fuse/file_content.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>

#include "fuse/key_names.h"
#include "kv/store.h"
#include "testutil/store_options.h"
#include "testutil/temp_dir.h"

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

// An empty file's content on a store of its own: chunks of 4 KiB, files
// up to 4 KiB inline.
class FileContentOnAStore : public ::testing::Test {
 protected:
  void SetUp() override {
    auto s = kv::Store::open(dir_.file("s.kv"), pm::test::small_store_options());
    ASSERT_TRUE(s.ok()) << s.status().to_string();
    store_ = std::move(*s);
    f_ = std::make_unique<FileContent>(store_.get(), &layout_, &ids_);
    f_->load("", false, "f");
  }

  pm::test::TempDir dir_;
  std::unique_ptr<kv::Store> store_;
  const Layout layout_{4096, 4096, 1 << 20};
  ChunkIds ids_;
  std::unique_ptr<FileContent> f_;
};

// A truncate into a chunk it cannot read (a damaged store) fails and
// changes nothing: the file keeps its size and every byte.
TEST_F(FileContentOnAStore, ATruncateThatCannotReadItsLastChunkChangesNothing) {
  std::string data(3 * 4096, '\0');
  for (size_t i = 0; i < data.size(); i++) data[i] = static_cast<char>('a' + i % 26);
  ASSERT_EQ(f_->write(0, data), 0);
  std::string value;
  bool chunked = false, wrote = false;
  ASSERT_EQ(f_->prepare(&value, &chunked, &wrote), 0);
  ASSERT_TRUE(chunked);
  EXPECT_TRUE(f_->committed().empty());
  std::optional<Manifest> m = decode_manifest(value);
  ASSERT_TRUE(m);
  ASSERT_EQ(m->ids.size(), 3u);
  ASSERT_TRUE(store_->remove(chunk_key(m->ids[1])).ok());  // the damage

  EXPECT_EQ(f_->truncate(4096 + 100), EIO);
  EXPECT_EQ(f_->size(), data.size());
  EXPECT_FALSE(f_->modified());
  std::string tail;
  ASSERT_EQ(f_->read(2 * 4096, 4096, &tail), 0);
  EXPECT_EQ(tail, data.substr(2 * 4096));
}

// zero() (fallocate's punch and zero ranges): whole chunks become holes
// (the manifest names id 0, and their old chunks are garbage after the
// commit), partial ones are zeroed in place, and nothing past the end
// changes.
TEST_F(FileContentOnAStore, ZeroedRangesReadAsZerosAndWholeChunksBecomeHoles) {
  std::string data(4 * 4096 + 10, '\0');
  for (size_t i = 0; i < data.size(); i++) data[i] = static_cast<char>('a' + i % 26);
  ASSERT_EQ(f_->write(0, data), 0);
  std::string value;
  bool chunked = false, wrote = false;
  ASSERT_EQ(f_->prepare(&value, &chunked, &wrote), 0);
  ASSERT_TRUE(f_->committed().empty());

  // Chunk 0 in part, chunk 1 whole, chunk 2 in part; then the last chunk,
  // a partial one, from its start past the end.
  ASSERT_EQ(f_->zero(100, 2 * 4096 + 50), 0);
  ASSERT_EQ(f_->zero(4 * 4096, 1000), 0);
  EXPECT_EQ(f_->size(), data.size());
  std::fill(data.begin() + 100, data.begin() + 100 + 2 * 4096 + 50, '\0');
  std::fill(data.begin() + 4 * 4096, data.end(), '\0');
  std::string back;
  ASSERT_EQ(f_->read(0, data.size() + 10, &back), 0);
  EXPECT_EQ(back, data);

  ASSERT_EQ(f_->prepare(&value, &chunked, &wrote), 0);
  std::optional<Manifest> m = decode_manifest(value);
  ASSERT_TRUE(m);
  ASSERT_EQ(m->ids.size(), 5u);
  EXPECT_EQ(m->ids[1], 0u);
  EXPECT_EQ(m->ids[4], 0u);
  EXPECT_EQ(f_->committed().size(), 4u);  // chunks 0 and 2 rewritten, 1 and 4 holes
}

// lseek's SEEK_DATA and SEEK_HOLE, and the bytes st_blocks leaves out: a
// chunked file's holes are its chunks of id 0, staged or stored; a file
// stored as one value is all data.
TEST_F(FileContentOnAStore, SeekAndHoleBytesSeeWholeChunkHoles) {
  ASSERT_EQ(f_->truncate(10 * 4096), 0);
  ASSERT_EQ(f_->write(5 * 4096 + 1, "x"), 0);
  auto seek = [&](uint64_t off, bool data) -> int64_t {
    uint64_t at = 0;
    const int err = f_->seek(off, data, &at);
    return err != 0 ? -err : static_cast<int64_t>(at);
  };
  for (int round = 0; round < 2; round++) {  // staged, then stored
    EXPECT_EQ(seek(0, true), 5 * 4096);
    EXPECT_EQ(seek(5 * 4096 + 7, true), 5 * 4096 + 7);
    EXPECT_EQ(seek(6 * 4096, true), -ENXIO);
    EXPECT_EQ(seek(0, false), 0);
    EXPECT_EQ(seek(5 * 4096, false), 6 * 4096);
    EXPECT_EQ(seek(10 * 4096 - 1, false), 10 * 4096 - 1);
    EXPECT_EQ(seek(10 * 4096, false), -ENXIO);  // at the end
    std::string value;
    bool chunked = false, wrote = false;
    ASSERT_EQ(f_->prepare(&value, &chunked, &wrote), 0);
    ASSERT_TRUE(chunked);
    EXPECT_EQ(f_->hole_bytes(), 9u * 4096);
    std::optional<Manifest> m = decode_manifest(value);
    ASSERT_TRUE(m);
    EXPECT_EQ(hole_bytes(m->chunk_bytes, m->size, m->ids), 9u * 4096);
    (void)f_->committed();
  }
  // A last chunk that is a hole counts only up to the end.
  ASSERT_EQ(f_->truncate(9 * 4096 + 10), 0);
  std::string value;
  bool chunked = false, wrote = false;
  ASSERT_EQ(f_->prepare(&value, &chunked, &wrote), 0);
  EXPECT_EQ(f_->hole_bytes(), 8u * 4096 + 10);
  (void)f_->committed();
  // In a range: the chunks it overlaps.
  EXPECT_EQ(f_->hole_bytes(0, 4096), 4096u);
  EXPECT_EQ(f_->hole_bytes(5 * 4096, 6 * 4096), 0u);
  EXPECT_EQ(f_->hole_bytes(8 * 4096 + 1, 1u << 30), 4096u + 10);
  // Small enough for one value: no holes.
  ASSERT_EQ(f_->truncate(4000), 0);
  EXPECT_EQ(seek(0, true), 0);
  EXPECT_EQ(seek(10, false), 4000);
  ASSERT_EQ(f_->prepare(&value, &chunked, &wrote), 0);
  EXPECT_FALSE(chunked);
  EXPECT_EQ(f_->hole_bytes(), 0u);
}

}  // namespace
}  // namespace pmfs
