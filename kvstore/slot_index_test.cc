#include "kvstore/slot_index.h"

#include <gtest/gtest.h>
#include <xxhash.h>

#include <map>
#include <random>
#include <string>
#include <vector>

namespace kv {
namespace {

// Keys live in a table of "slots" the test owns, as the tree's live in its
// file; an offset is a position in that table plus 2 (0 and 1 are reserved).
TEST(SlotIndexTest, AgreesWithAMapUnderInsertsOverwritesAndErases) {
  std::vector<std::string> slots(2);
  auto key_at = [&](uint64_t off) { return std::string_view(slots[off]); };
  auto h = [](std::string_view k) {
    // Few distinct hashes: collisions and long probe runs are the point.
    return XXH3_64bits(k.data(), k.size()) % 64;
  };
  SlotIndex idx;
  std::map<std::string, uint64_t> model;
  std::mt19937_64 rng(7);
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
  const int ops = 40000;  // a single-threaded table: sanitizers look for bad accesses
#else
  const int ops = 200000;
#endif
  for (int op = 0; op < ops; op++) {
    const std::string k = "k" + std::to_string(rng() % 3000);
    const int what = static_cast<int>(rng() % 3);
    if (what < 2) {  // a put moves the key to a new slot
      slots.push_back(k);
      idx.set(k, h(k), slots.size() - 1, key_at);
      model[k] = slots.size() - 1;
    } else {
      idx.erase(k, h(k), key_at);
      model.erase(k);
    }
    if (op % 997 == 0) {
      ASSERT_EQ(idx.size(), model.size());
      for (int i = 0; i < 3000; i++) {
        const std::string q = "k" + std::to_string(i);
        auto it = model.find(q);
        ASSERT_EQ(idx.find(q, h(q), key_at), it == model.end() ? 0 : it->second) << q;
      }
    }
  }
  idx.clear();
  EXPECT_EQ(idx.size(), 0u);
  EXPECT_EQ(idx.find("k1", h("k1"), key_at), 0u);
}

}  // namespace
}  // namespace kv
