#include "protocol.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <random>
#include <set>

#include "testutil/temp_dir.h"

namespace pmcached {
namespace {

class ProtocolTest : public ::testing::Test {
 protected:
  void SetUp() override {
    CacheOptions o;
    o.item_max = 4096;
    Result<std::unique_ptr<Cache>> c = Cache::open(dir_.file("p.kv"), o);
    ASSERT_TRUE(c.ok()) << c.status().to_string();
    cache_ = std::move(*c);
    info_.version = "test";
  }
  // Feeds `in` in pieces of `chunk` bytes, as a socket may deliver it.
  std::string run(Session& s, std::string_view in, size_t chunk = SIZE_MAX) {
    std::string out, buf;
    for (size_t i = 0; i < in.size() && !s.closing(); i += chunk) {
      buf.append(in.substr(i, chunk));
      buf.erase(0, s.feed(buf, &out));
    }
    return out;
  }
  std::string run(std::string_view in, size_t chunk = SIZE_MAX) {
    Session s(cache_.get(), &info_);
    return run(s, in, chunk);
  }

  pm::test::TempDir dir_;
  std::unique_ptr<Cache> cache_;
  ServerInfo info_;
};

TEST_F(ProtocolTest, RepliesAreTheSameWhateverTheChunking) {
  const std::string script =
      "set a 1 0 3\r\nabc\r\nget a b\r\nappend a 0 0 2 noreply\r\nde\r\nget a\r\n"
      "incr a 1\r\nset n 0 0 2\r\n10\r\ndecr n 3\r\ndelete n\r\ndelete n\r\n"
      "touch a 100\r\nbogus\r\nset x 0 0 1\r\nxyz\r\nget a\r\n";
  const std::string whole = run(script);
  EXPECT_NE(whole.find("VALUE a 1 3\r\nabc\r\nEND\r\n"), std::string::npos) << whole;
  EXPECT_NE(whole.find("CLIENT_ERROR cannot increment or decrement non-numeric value\r\n"),
            std::string::npos);
  EXPECT_NE(whole.find("7\r\nDELETED\r\nNOT_FOUND\r\nTOUCHED\r\nERROR\r\n"), std::string::npos)
      << whole;
  EXPECT_NE(whole.find("CLIENT_ERROR bad data chunk\r\n"), std::string::npos) << whole;
  for (size_t chunk : {1, 2, 3, 7, 64}) {
    ASSERT_TRUE(cache_->flush_all(0).ok());
    EXPECT_EQ(run(script, chunk), whole) << "chunk " << chunk;
  }
}

// A get naming a key many times (a line of a megabyte names half a million
// keys) streams its reply: feed stops between two values at its limit and
// goes on at the next feed, before the next command, with no input.
TEST_F(ProtocolTest, AGetOfManyValuesStreamsItsReplyAtTheFeedsLimit) {
  std::string script = "set k 0 0 4000\r\n" + std::string(4000, 'v') + "\r\nget";
  for (int i = 0; i < 1000; i++) script += " k   z";  // 4 MB of values, misses between
  script += "\r\nget k\r\n";
  const std::string value = "VALUE k 0 4000\r\n" + std::string(4000, 'v') + "\r\n";
  std::string want = "STORED\r\n";
  for (int i = 0; i < 1000; i++) want += value;
  want += "END\r\n" + value + "END\r\n";
  EXPECT_EQ(run(script), want);
  Session s(cache_.get(), &info_);
  std::string out, chunk;
  size_t used = 0, feeds = 0;
  do {
    chunk.clear();
    used += s.feed(std::string_view(script).substr(used), &chunk, 100000);
    EXPECT_LT(chunk.size(), 100000u + 4100u) << "one value past the limit at most";
    out += chunk;
    ASSERT_LT(++feeds, 1000u);
  } while (used < script.size() || s.streaming());
  EXPECT_GT(feeds, 40u);
  EXPECT_EQ(out, want);
}

// A gat's relative expiry counts from the command, as memcached's does:
// the keys of a reply that streams while the clock moves all get the same.
TEST_F(ProtocolTest, AStreamedGatGivesEveryKeyTheSameExpiry) {
  std::atomic<int64_t> now{1'700'000'000};
  CacheOptions o;
  o.clock = [&] { return now.load(); };
  Result<std::unique_ptr<Cache>> c = Cache::open(dir_.file("gat.kv"), o);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  std::string script = "gat 100";
  for (int i = 0; i < 100; i++) {
    const std::string key = "g" + std::to_string(i);
    ASSERT_EQ(*(*c)->store(StoreMode::kSet, key, 0, 0, std::string(1000, 'x')),
              StoreResult::kStored);
    script += " " + key;
  }
  script += "\r\n";
  Session s(c->get(), &info_);
  std::string out;
  size_t used = 0, feeds = 0;
  do {
    used += s.feed(std::string_view(script).substr(used), &out, out.size() + 10000);
    now++;  // a second passes between the parts of the reply
    ASSERT_LT(++feeds, 100u);
  } while (used < script.size() || s.streaming());
  EXPECT_GT(feeds, 5u);
  for (int i = 0; i < 100; i++) {
    Item it;
    ASSERT_TRUE(*(*c)->get("g" + std::to_string(i), &it));
    EXPECT_EQ(it.exptime, 1'700'000'100) << "g" << i;
  }
}

// Pipelined gets of a large item: feed stops once the replies reach the
// limit, and goes on from there when fed again; the replies are the same.
TEST_F(ProtocolTest, FeedStopsAtItsReplyLimitAndGoesOnWhereItStopped) {
  run("set k 0 0 4000\r\n" + std::string(4000, 'v') + "\r\n");
  std::string in;
  for (int i = 0; i < 50; i++) in += "get k\r\n";
  const std::string whole = run(in);
  Session s(cache_.get(), &info_);
  std::string out, chunk;
  size_t used = 0, feeds = 0;
  while (used < in.size()) {
    chunk.clear();
    used += s.feed(std::string_view(in).substr(used), &chunk, 10000);
    EXPECT_LT(chunk.size(), 10000u + 4100u) << "one reply past the limit at most";
    out += chunk;
    ASSERT_LT(++feeds, 100u);
  }
  EXPECT_GT(feeds, 10u);
  EXPECT_EQ(out, whole);
}

TEST_F(ProtocolTest, AnOversizedSetRemovesTheValueItReplacesAndAMetaMissKeepsItsOpaque) {
  EXPECT_EQ(run("set k 0 0 1\r\nq\r\nset k 0 0 5000\r\n" + std::string(5000, 'x') +
                "\r\nget k\r\nmg k k O123 v\r\nmg k q\r\nmn\r\n"),
            "STORED\r\nSERVER_ERROR object too large for cache\r\nEND\r\nEN kk O123\r\nMN\r\n");
}

// A batch's replies wait for one sync when any command in it changed the
// store: an oversized set after a stored one must not clear that.
TEST_F(ProtocolTest, AnOversizedSetLeavesTheBatchsEarlierChangeWaitingForTheSync) {
  Session s(cache_.get(), &info_);
  EXPECT_EQ(run(s, "set b 0 0 1\r\ny\r\nset none 0 0 5000\r\n" + std::string(5000, 'x') +
                       "\r\n"),
            "STORED\r\nSERVER_ERROR object too large for cache\r\n");
  EXPECT_TRUE(s.take_wrote());
}

// As memcached: ms's C compares in every mode (C0 matches no item in set
// mode, and compares nothing in the others), md's too; an oversized ms
// removes the old value in any mode.
TEST_F(ProtocolTest, MetaCasGuardsEveryModeAndAnOversizedMsRemovesInAny) {
  EXPECT_EQ(run("ms m 1\r\na\r\nms m 1 C999999 MA\r\nb\r\nms m 1 C999999 MP\r\nb\r\n"
                "ms m 1 C999999 MR\r\nb\r\nms m 1 C0\r\nb\r\nmg m v\r\n"),
            "HD\r\nEX\r\nEX\r\nEX\r\nEX\r\nVA 1\r\na\r\n");
  EXPECT_EQ(run("ms c 1\r\na\r\nms c 1 C0 MA\r\nb\r\nmg c v\r\n"), "HD\r\nHD\r\nVA 2\r\nab\r\n");
  EXPECT_EQ(run("md m C0\r\nmg m v\r\nmd m C999999\r\nmd m\r\nmg m v\r\n"),
            "EX\r\nVA 1\r\na\r\nEX\r\nHD\r\nEN\r\n");
  EXPECT_EQ(run("set t 0 0 1\r\nx\r\nms t 5000 MA\r\n" + std::string(5000, 'y') +
                "\r\nget t\r\n"),
            "STORED\r\nSERVER_ERROR object too large for cache\r\nEND\r\n");
}

// memcached 1.6.18's stale-while-revalidate, replies as it gives them:
// md I marks an item stale (new CAS); the first mg wins its recache (W),
// later ones see Z; an ms I with an older CAS still stores, as stale; a
// plain set makes it fresh. mg N vivifies a miss the same way.
TEST_F(ProtocolTest, StaleItemsAndVivifiedMissesHandOutOneRecacheToken) {
  EXPECT_EQ(run("ms k 1 T100\r\na\r\nmd k I q\r\nmg k v\r\nmg k v\r\nmg k s\r\nmg k c\r\n"),
            "HD\r\nVA 1 X W\r\na\r\nVA 1 Z X\r\na\r\nHD s1 Z X\r\nHD c2 Z X\r\n");
  EXPECT_EQ(run("ms k 1 C1 I\r\nb\r\nmg k v\r\nms k 1\r\nc\r\nmg k v\r\n"),
            "HD\r\nVA 1 Z X\r\nb\r\nHD\r\nVA 1\r\nc\r\n");
  EXPECT_EQ(run("mg n s v N30\r\nmg n s v N30\r\nmg n t h\r\n"),
            "VA 0 s0 W\r\n\r\nVA 0 s0 Z\r\n\r\nHD t30 h1 Z\r\n");
}

// Base64 keys (b) name the same items as text keys; an item stored with one
// shows its key in base64 until an append replaces it. A binary key that
// starts with a NUL byte cannot reach the cache's own records.
TEST_F(ProtocolTest, Base64KeysAndTheirReplies) {
  EXPECT_EQ(run("ms a2V5 1 b k\r\nx\r\nmg key v k\r\nmg a2V5 b k s\r\nms key 1 MA k\r\ny\r\n"
                "mg key k\r\nmg !! b\r\nme a2V5 b\r\n"),
            "HD ka2V5 b\r\nVA 1 ka2V5 b\r\nx\r\nHD ka2V5 b s1\r\nHD kkey\r\nHD kkey\r\n"
            "CLIENT_ERROR error decoding key\r\n"
            "ME key exp=-1 la=0 cas=2 fetch=yes cls=1 size=53\r\n");
  // memcached's decoder skips what is not base64 and stops at padding.
  EXPECT_EQ(run("ms a2V5* 1 b\r\nx\r\nmg key v\r\nmg AB=C b k\r\nmg A=== b\r\nmg ==== b\r\n"),
            "HD\r\nVA 1\r\nx\r\nEN kABA= b\r\nCLIENT_ERROR error decoding key\r\n"
            "CLIENT_ERROR error decoding key\r\n");
  // "\0pmcached/cas" and "\0pmcached/flush": the CAS block and the flush mark.
  EXPECT_EQ(run("ms AHBtY2FjaGVkL2Nhcw== 1 b\r\nx\r\nms AHBtY2FjaGVkL2ZsdXNo 1 b\r\ny\r\n"
                "mg AHBtY2FjaGVkL2Nhcw== b v\r\nmg key v\r\n"),
            "HD\r\nHD\r\nVA 1\r\nx\r\nVA 1\r\nx\r\n");
}

// Keys with control characters are keys, as memcached stores them: a set
// refused for one ran its data block as a command (here: flush_all).
TEST_F(ProtocolTest, KeysWithControlCharactersAreStoredAsMemcachedDoes) {
  EXPECT_EQ(run(std::string("set keep 0 0 1\r\nk\r\nset a\x01b 0 0 9\r\nflush_all\r\n"
                            "get keep\r\nget a\x01b\r\ndelete a\x7f\r\n")),
            std::string("STORED\r\nSTORED\r\nVALUE keep 0 1\r\nk\r\nEND\r\n"
                        "VALUE a\x01b 0 9\r\nflush_all\r\nEND\r\nNOT_FOUND\r\n"));
}

// Each command's error strings, as memcached 1.6.18 words them.
TEST_F(ProtocolTest, MetaErrorsAreMemcachedsWordForWord) {
  EXPECT_EQ(run("mg k0 T0 x\r\nmg k0 T0 T0\r\nmd k0 x\r\nma k0 Mi\r\nms k0 1 Ms\r\na\r\n"
                "mg\r\nma k Dx\r\nmg k Tx\r\nms k 1 MSS\r\nb\r\nmg k O" + std::string(32, 'o') +
                "\r\n"),
            "CLIENT_ERROR invalid flag\r\nCLIENT_ERROR duplicate flag\r\n"
            "CLIENT_ERROR invalid or duplicate flag\r\nCLIENT_ERROR invalid mode for ma M token\r\n"
            "CLIENT_ERROR invalid mode for ms M token\r\nERROR\r\n"
            "CLIENT_ERROR invalid or duplicate flag\r\n"
            "CLIENT_ERROR bad token in command line format\r\n"
            "CLIENT_ERROR incorrect length for M token\r\nCLIENT_ERROR opaque token too long\r\n");
}

// Only a connection's first byte tells the binary protocol.
TEST_F(ProtocolTest, ByteEightyLaterIsAnUnknownCommand) {
  EXPECT_EQ(run("mn\r\n\x80" "abc\r\nmn\r\n"), "MN\r\nERROR\r\nMN\r\n");
  Session s(cache_.get(), &info_);
  EXPECT_EQ(run(s, "\x80" "abc\r\n"), "");  // a binary header, not complete yet
  EXPECT_FALSE(s.closing());
  EXPECT_EQ(run(s, "\x80" "abc\r\n" + std::string(18, '\0')).substr(0, 2), "\x81" "a");
}

// A binary request: header (magic, opcode, key length, extras length,
// type, vbucket, body length, opaque, cas), extras, key, value.
std::string bin(uint8_t op, std::string_view key, std::string_view extras = {},
                std::string_view value = {}, uint64_t cas = 0) {
  std::string r;
  auto be = [&](uint64_t v, int bytes) {
    for (int i = bytes - 1; i >= 0; i--) r.push_back(static_cast<char>(v >> (8 * i)));
  };
  r.push_back('\x80');
  r.push_back(static_cast<char>(op));
  be(key.size(), 2);
  r.push_back(static_cast<char>(extras.size()));
  be(0, 3);
  be(extras.size() + key.size() + value.size(), 4);
  be(0x01020304, 4);
  be(cas, 8);
  return r.append(extras).append(key).append(value);
}
// Binary replies with their CAS fields zeroed (each run hands out new ones).
std::string without_cas(std::string replies) {
  for (size_t at = 0; at + 24 <= replies.size();) {
    std::fill_n(replies.begin() + static_cast<ptrdiff_t>(at + 16), 8, '\0');
    uint32_t body = 0;
    for (int i = 8; i < 12; i++) body = body << 8 | static_cast<unsigned char>(replies[at + i]);
    at += 24 + body;
  }
  return replies;
}
const std::string kSetExtras("\0\0\0\x07\0\0\0\0", 8);  // flags 7, no expiry

// A binary request is judged from its header: one claiming a body of 4
// GiB is answered before any of it comes (it used to hold the connection's
// input until all of it had), refused when its opcode takes no such body,
// read past when the opcode is unknown.
TEST_F(ProtocolTest, ABinaryBodyClaimedIsNotWaitedFor) {
  auto claiming = [](std::string r, uint32_t body) {
    for (int i = 0; i < 4; i++) r[8 + i] = static_cast<char>(body >> (24 - 8 * i));
    return r;
  };
  Session get(cache_.get(), &info_);
  std::string out;
  const std::string huge_get = claiming(bin(0x00, "k"), 0xffffffffu);
  EXPECT_EQ(get.feed(huge_get, &out), huge_get.size());
  EXPECT_NE(out.find("Invalid arguments"), std::string::npos);
  EXPECT_TRUE(get.closing());
  Session unknown(cache_.get(), &info_);
  out.clear();
  const std::string huge_unknown = claiming(bin(0x40, ""), 0xffffffffu);
  EXPECT_EQ(unknown.feed(huge_unknown, &out), huge_unknown.size());
  EXPECT_NE(out.find("Unknown command"), std::string::npos);
  EXPECT_FALSE(unknown.closing());
  out.clear();  // the body, as it comes, is read past
  EXPECT_EQ(unknown.feed(std::string(1 << 20, 'x'), &out), size_t{1} << 20);
  EXPECT_EQ(out, "");
}

// Binary stat detail dump sends the dump whole: prefixes are clients' keys,
// whose line ends once split it into made-up stats (or an error).
TEST_F(ProtocolTest, ABinaryDetailDumpIsOneReplyWhateverTheKeys) {
  Session s(cache_.get(), &info_);
  const std::string out = run(s, bin(0x10, "detail on") + bin(0x01, "x\r\nERROR\r\n:y", kSetExtras,
                                                               "v") +
                                     bin(0x10, "detail dump"));
  const size_t at = out.find("detailed");
  ASSERT_NE(at, std::string::npos) << out;
  EXPECT_NE(out.find("PREFIX x\r\nERROR\r\n get 0 hit 0 set 1", at), std::string::npos);
  EXPECT_NE(out.find("END\r\n", at), std::string::npos);
  EXPECT_EQ(out.find("Not found"), std::string::npos);
}

// The binary protocol's replies do not depend on how the bytes arrive,
// a value over the item limit is read past (never buffered), and a quiet
// set answers nothing but still waits for the sync.
TEST_F(ProtocolTest, BinaryRepliesAreTheSameWhateverTheChunking) {
  const std::string script =
      bin(0x01, "k", kSetExtras, "hello") + bin(0x00, "k") + bin(0x0c, "missing") +
      bin(0x01, "big", kSetExtras, std::string(5000, 'x')) + bin(0x0d, "big") +
      bin(0x05, "n", std::string("\0\0\0\0\0\0\0\x02\0\0\0\0\0\0\0\x0a\0\0\0\0", 20)) +
      bin(0x11, "q", kSetExtras, "quiet") + bin(0x10, "") + bin(0x0a, "");
  const std::string whole = without_cas(run(script));
  const std::string get_reply = whole.substr(24, 24 + 4 + 5);
  EXPECT_EQ(get_reply.substr(0, 2), std::string("\x81\0", 2));
  EXPECT_EQ(get_reply.substr(24), std::string("\0\0\0\x07hello", 9));
  EXPECT_NE(whole.find("Too large."), std::string::npos);
  EXPECT_NE(whole.find("missing"), std::string::npos);  // getk's miss names the key
  for (size_t chunk : {1, 2, 3, 7, 64, 1000}) {
    ASSERT_TRUE(cache_->flush_all(0).ok());
    const std::string part = without_cas(run(script, chunk));
    // (stat's figures may differ from run to run: compared up to it.)
    const size_t stat_at = whole.find("\x81\x10");
    EXPECT_EQ(part.substr(0, stat_at), whole.substr(0, stat_at)) << "chunk " << chunk;
  }
  Session s(cache_.get(), &info_);
  EXPECT_EQ(run(s, bin(0x11, "q2", kSetExtras, "v")), "");
  EXPECT_TRUE(s.take_wrote());
  Item it;
  ASSERT_TRUE(*cache_->get("q2", &it));
  EXPECT_EQ(it.flags, 7u);
}

// incr reads a value as memcached's strtoull does.
TEST_F(ProtocolTest, IncrReadsNumbersAsMemcachedDoes) {
  for (const char* v : {"+5", " 12", "12 ab", "0000000000000000000012"}) {
    const std::string value(v);
    EXPECT_EQ(run("set n 0 0 " + std::to_string(value.size()) + "\r\n" + value +
                  "\r\nincr n 1\r\n"),
              std::string("STORED\r\n") + (value == "+5" ? "6" : "13") + "\r\n")
        << v;
  }
  EXPECT_EQ(run("incr n 000000000000000000001\r\n"), "14\r\n");
  EXPECT_EQ(run("set n 0 0 2\r\n-1\r\nincr n 1\r\n"),
            "STORED\r\nCLIENT_ERROR cannot increment or decrement non-numeric value\r\n");
}

TEST_F(ProtocolTest, OversizedValuesAreSwallowedAndLongLinesClose) {
  const std::string big(5000, 'x');
  EXPECT_EQ(run("set k 0 0 5000\r\n" + big + "\r\nget k\r\n", 100),
            "SERVER_ERROR object too large for cache\r\nEND\r\n");
  Session s(cache_.get(), &info_);
  EXPECT_EQ(run(s, std::string(kMaxLine + 10, 'y')), "");
  EXPECT_TRUE(s.closing());
  Session b(cache_.get(), &info_);
  run(b, bin(0x00, std::string(251, 'k')));  // a binary key too long: the connection goes
  EXPECT_TRUE(b.closing());
}

// memcached's dumps (memcached-tool's dump and keys read lru_crawler
// metadump; libmemcached's memcdump stats cachedump) and stats detail.
TEST_F(ProtocolTest, DumpsAndPrefixStatsAnswerAsMemcachedDoes) {
  EXPECT_EQ(run("lru_crawler metadump all\r\n"), "END\r\n");
  run("set a%20b 5 0 1\r\nx\r\nset k 3 0 2\r\nyy\r\nget k\r\nms AGFi 1 b\r\nz\r\n");
  const std::string dump = run("lru_crawler metadump all\r\n");
  EXPECT_NE(dump.find("key=a%2520b exp=-1 la="), std::string::npos) << dump;
  EXPECT_NE(dump.find(" fetch=no cls=1 size="), std::string::npos) << dump;
  EXPECT_NE(dump.find("key=k exp=-1 la="), std::string::npos) << dump;
  EXPECT_NE(dump.find(" fetch=yes cls=1 size="), std::string::npos) << dump;
  EXPECT_NE(dump.find("key=%00ab exp=-1"), std::string::npos) << "a binary key, encoded";
  EXPECT_EQ(std::count(dump.begin(), dump.end(), '\n'), 4) << dump;
  EXPECT_TRUE(dump.ends_with("\nEND\r\n")) << dump;
  EXPECT_EQ(run("lru_crawler metadump 1,2\r\n"), dump);
  EXPECT_EQ(run("lru_crawler metadump 2\r\n"), "END\r\n");
  EXPECT_EQ(run("lru_crawler metadump 64\r\nlru_crawler metadump x\r\n"),
            "BADCLASS invalid class id\r\nBADCLASS invalid class id\r\n");
  EXPECT_EQ(run("lru_crawler metadump\r\nlru_crawler metadump ,\r\n"),
            "ERROR\r\nNOTSTARTED no items to crawl\r\n");
  EXPECT_EQ(run("lru_crawler crawl all\r\nlru_crawler sleep 2000000\r\nlru_crawler tocrawl x\r\n"),
            "OK\r\nCLIENT_ERROR sleep must be one second or less\r\n"
            "CLIENT_ERROR bad command line format\r\n");

  const std::string items = run("stats cachedump 1 0\r\n");
  EXPECT_NE(items.find("ITEM a%20b [1 b; 0 s]\r\n"), std::string::npos) << items;
  EXPECT_NE(items.find("ITEM k [2 b; 0 s]\r\n"), std::string::npos) << items;
  EXPECT_EQ(items.find("ab ["), std::string::npos) << "binary keys are left out: " << items;
  const std::string one = run("stats cachedump 1 1\r\n");
  EXPECT_EQ(std::count(one.begin(), one.end(), '\n'), 2) << one;
  EXPECT_EQ(run("stats cachedump 2 0\r\nstats cachedump 64 0\r\nstats cachedump 1\r\n"),
            "END\r\nCLIENT_ERROR Illegal slab id\r\nCLIENT_ERROR bad command line\r\n");
  EXPECT_EQ(run("stats sizes\r\n"), "STAT sizes_status disabled\r\nEND\r\n");

  // Per prefix (before the first ':'), classic commands only, while on.
  EXPECT_EQ(run("set p:1 0 0 1\r\nx\r\nstats detail dump\r\n"), "STORED\r\nEND\r\n");
  EXPECT_EQ(run("stats detail on\r\nset p:1 0 0 1\r\nx\r\nget p:1 p:2 q\r\ndelete p:1\r\n"
                "mg p:3 v\r\nset q 0 0 1\r\nx\r\nstats detail dump\r\n"),
            "OK\r\nSTORED\r\nVALUE p:1 0 1\r\nx\r\nEND\r\nDELETED\r\nEN\r\nSTORED\r\n"
            "PREFIX p get 2 hit 1 set 1 del 1\r\nEND\r\n");
  EXPECT_EQ(run("stats detail x\r\nstats detail\r\n"),
            "CLIENT_ERROR usage: stats detail on|off|dump\r\n"
            "CLIENT_ERROR usage: stats detail on|off|dump\r\n");
  EXPECT_EQ(run("stats reset\r\nstats detail dump\r\n"), "RESET\r\nEND\r\n");
}

// A metadump of many items streams: a feed stops at its limit between two
// index shards and goes on at the next, and every item is listed once.
TEST_F(ProtocolTest, AMetadumpOfManyItemsStreamsAtTheFeedsLimit) {
  for (int i = 0; i < 3000; i++) {
    ASSERT_TRUE(cache_->store(StoreMode::kSet, "key" + std::to_string(i), 0, 0, "v").ok());
  }
  Session s(cache_.get(), &info_);
  const std::string cmd = "lru_crawler metadump all\r\nmn\r\n";
  std::string out, chunk;
  size_t used = 0, feeds = 0;
  do {
    chunk.clear();
    used += s.feed(std::string_view(cmd).substr(used), &chunk, 4096);
    EXPECT_LT(chunk.size(), 4096u + 2000u) << "one shard past the limit at most";
    out += chunk;
    ASSERT_LT(++feeds, 10000u);
  } while (used < cmd.size() || s.streaming());
  EXPECT_GT(feeds, 20u);
  ASSERT_TRUE(out.ends_with("END\r\nMN\r\n")) << out.substr(out.size() - 100);
  std::set<std::string> keys;
  for (size_t at = 0; out.compare(at, 4, "key=") == 0; at = out.find('\n', at) + 1) {
    EXPECT_TRUE(keys.insert(out.substr(at + 4, out.find(' ', at) - at - 4)).second);
  }
  EXPECT_EQ(keys.size(), 3000u);
}

// Random bytes and random mutations of valid commands, in random chunks:
// the session never crashes, never hangs, and the cache stays usable.
TEST_F(ProtocolTest, RandomInputNeverBreaksTheServer) {
  std::mt19937_64 rng(42);
  const std::vector<std::string> seeds = {
      "set k 0 0 3\r\nabc\r\n", "get k k2 k3\r\n", "gets k\r\n", "cas k 0 0 1 5\r\nx\r\n",
      "incr k 5\r\n",           "decr k 5\r\n",    "touch k 10\r\n", "gat 10 k\r\n",
      "delete k noreply\r\n",   "flush_all 0\r\n", "stats\r\n",  "version\r\n",
      "append k 0 0 1\r\nz\r\n", "verbosity 1\r\n", "mn\r\n", "lru_crawler metadump all\r\n",
      "stats cachedump 1 0\r\n", "stats detail on\r\n", "stats detail dump\r\n",
      bin(0x01, "k", kSetExtras, "v"), bin(0x0c, "k"), bin(0x10, "detail dump"),
      bin(0x05, "k", std::string(20, '\x01')), bin(0x1d, "k", "\0\0\0\x01")};
  for (int round = 0; round < 3000; round++) {
    std::string in;
    const int parts = 1 + static_cast<int>(rng() % 6);
    for (int p = 0; p < parts; p++) {
      std::string piece = seeds[rng() % seeds.size()];
      switch (rng() % 4) {
        case 0:  // flip bytes
          for (int f = 0; f < 3; f++) piece[rng() % piece.size()] = static_cast<char>(rng());
          break;
        case 1:  // cut short
          piece.resize(rng() % piece.size());
          break;
        case 2:  // random bytes
          piece.assign(rng() % 64, '\0');
          for (char& ch : piece) ch = static_cast<char>(rng());
          break;
        default:
          break;
      }
      in += piece;
    }
    Session s(cache_.get(), &info_);
    (void)run(s, in, 1 + rng() % 16);
  }
  Item it;
  ASSERT_TRUE(cache_->store(StoreMode::kSet, "after", 0, 0, "fine").ok());
  ASSERT_TRUE(*cache_->get("after", &it));
  EXPECT_EQ(it.data, "fine");
}

}  // namespace
}  // namespace pmcached
