#include "fuse/key_names.h"

#include <gtest/gtest.h>

namespace pmfs {
namespace {

TEST(KeyNamesTest, PlainComponentsAreTheirOwnNames) {
  EXPECT_EQ(encode_name("abc"), "abc");
  EXPECT_EQ(encode_name("a%b"), "a%b");
  EXPECT_EQ(decode_name("a%b"), "a%b");
  // Names that start with '%' are names too (issue 18: "%" at the root).
  for (const char* n : {"%", "%a", "%20x", "%%x", "%%%", "%25"}) {
    EXPECT_EQ(decode_name(n), n) << n;
    EXPECT_EQ(encode_name(n), n) << n;
  }
}

TEST(KeyNamesTest, UnnamableComponentsAreEscaped) {
  EXPECT_EQ(encode_name(""), "%%");
  EXPECT_EQ(encode_name("."), "%%.");
  EXPECT_EQ(encode_name(".."), "%%..");
  EXPECT_EQ(encode_name(std::string("a\0b", 3)), "%%a%00b");
  EXPECT_EQ(encode_name("%%"), "%%%25%25");  // an escape itself is escaped
  EXPECT_EQ(encode_name("%%."), "%%%25%25.");
}

TEST(KeyNamesTest, EscapesRoundTrip) {
  for (std::string c :
       {std::string(), std::string("."), std::string(".."), std::string("%"), std::string("%%"),
        std::string("%%."), std::string("%%%25%25"), std::string("%25"), std::string("a\0", 2),
        std::string("plain"), std::string("x%y"), std::string("%%x")}) {
    EXPECT_EQ(decode_name(encode_name(c)), c) << c;
  }
  EXPECT_FALSE(decode_name(""));
  EXPECT_FALSE(decode_name(".."));
}

TEST(KeyNamesTest, KeysSplitIntoNames) {
  EXPECT_EQ(key_to_names("a/b/c"), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(key_to_names("a//b/"), (std::vector<std::string>{"a", "%%", "b", "%%"}));
  EXPECT_EQ(key_to_names("../x"), (std::vector<std::string>{"%%..", "x"}));
  EXPECT_FALSE(key_to_names("/x"));  // the root's "%%" is the empty key: refused
  EXPECT_EQ(key_to_names("%/%x"), (std::vector<std::string>{"%", "%x"}));
  EXPECT_FALSE(key_to_names(std::string("\0m/x", 4)));  // reserved
  EXPECT_FALSE(key_to_names(std::string(256, 'n')));    // name too long
}

TEST(KeyNamesTest, MetaRecordRoundTrips) {
  Meta m{0100644, 1000, 100, 1234567890123456789, -5, 1234567890123456789, 0};
  const std::string r = encode_meta(m);
  ASSERT_EQ(r.size(), kMetaRecordBytes);
  auto d = decode_meta(r);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->mode, m.mode);
  EXPECT_EQ(d->uid, m.uid);
  EXPECT_EQ(d->gid, m.gid);
  EXPECT_EQ(d->mtime_ns, m.mtime_ns);
  EXPECT_EQ(d->ctime_ns, m.ctime_ns);
}

TEST(KeyNamesTest, Version2CarriesAtimeAndDeviceNumber) {
  Meta m{020644, 0, 0, 1, 2, -3, 0x0000000100000005ull};
  const std::string r = encode_meta(m);
  ASSERT_EQ(r.size(), kMetaRecordV2Bytes);
  auto d = decode_meta(r);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->mode, m.mode);
  EXPECT_EQ(d->atime_ns, -3);
  EXPECT_EQ(d->rdev, m.rdev);
  EXPECT_FALSE(decode_meta(r.substr(0, kMetaRecordBytes)));  // version 2 cut short
  // atime == mtime and no device: version 1, which reads atime as mtime.
  const std::string v1 = encode_meta(Meta{0100600, 0, 0, 7, 8, 7, 0});
  ASSERT_EQ(v1.size(), kMetaRecordBytes);
  EXPECT_EQ(decode_meta(v1)->atime_ns, 7);
}

TEST(KeyNamesTest, XattrRecordsRoundTripAndDamageIsRefused) {
  const Xattrs x{{"user.a", "1"}, {"user.empty", ""}, {"security.b", std::string("\0\xff", 2)}};
  const std::string r = encode_xattrs(x);
  EXPECT_EQ(decode_xattrs(r), x);
  EXPECT_EQ(decode_xattrs(""), Xattrs());
  for (size_t cut = 1; cut < r.size(); cut++) {
    std::optional<Xattrs> d = decode_xattrs(r.substr(0, cut));
    EXPECT_TRUE(!d || d->size() < x.size()) << cut;  // never reads past the end
  }
  EXPECT_FALSE(decode_xattrs(std::string("\xff\xff\xff\x7f", 4)));
}

TEST(KeyNamesTest, UnknownMetaVersionIsRejected) {
  std::string r = encode_meta(Meta{});
  r[0] = 3;
  EXPECT_FALSE(decode_meta(r));
  EXPECT_FALSE(decode_meta("short"));
  EXPECT_FALSE(decode_meta(""));
}

}  // namespace
}  // namespace pmfs
