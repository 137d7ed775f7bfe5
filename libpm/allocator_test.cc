#include "pm/allocator.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <boost/container/deque.hpp>
#include <boost/container/flat_map.hpp>
#include <boost/container/map.hpp>
#include <boost/container/scoped_allocator.hpp>
#include <boost/container/string.hpp>
#include <boost/container/vector.hpp>
#include <boost/unordered_map.hpp>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <typeinfo>
#include <vector>

#include "pm/named.h"
#include "testutil/container_util.h"
#include "testutil/temp_dir.h"

namespace pm {
namespace {

template <typename T>
using Vector = boost::container::vector<T, allocator<T>>;
using String = boost::container::basic_string<char, std::char_traits<char>, allocator<char>>;
template <typename K, typename V>
using Map = boost::container::map<K, V, std::less<K>, allocator<std::pair<const K, V>>>;
template <typename K, typename V>
using FlatMap = boost::container::flat_map<K, V, std::less<K>, allocator<std::pair<K, V>>>;
template <typename T>
using Deque = boost::container::deque<T, allocator<T>>;
template <typename K, typename V>
using UnorderedMap =
    boost::unordered_map<K, V, boost::hash<K>, std::equal_to<K>, allocator<std::pair<const K, V>>>;

using test::must;
using test::small;

// A value long enough to leave the string's inline buffer for most k.
std::string text(uint64_t k) {
  return std::string(k % 40 + 1, static_cast<char>('a' + k % 26)) + "#" + std::to_string(k);
}

// Heap metadata consistent.
void expect_clean(Container& c) {
  CheckReport r = c.check();
  EXPECT_TRUE(r.problems.empty()) << r.problems.front();
}

// Boost containers write with plain stores, which the hints tracker does not
// see (allocator.h): these suites skip under PM_TRACKER=hints.
class AllocatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (test::hints_only()) GTEST_SKIP() << "Boost containers need the uffd or mprotect tracker";
  }

  // Creates the container, runs `build` on it and commits.
  template <typename Fn>
  void create_and_commit(Fn build) {
    auto c = must(Container::create(path_, small()));
    ASSERT_NE(c, nullptr);
    build(*c);
    ASSERT_TRUE(c->commit().ok());
  }

  test::TempDir dir_;
  std::string path_ = dir_.file("c.pm");
};

TEST_F(AllocatorTest, VectorSurvivesCommitAndReopen) {
  create_and_commit([](Container& c) {
    auto* v = *c.make<Vector<uint64_t>>(allocator<uint64_t>(c));
    for (uint64_t i = 0; i < 20000; i++) v->push_back(i * 3);  // small blocks, then page runs
    ASSERT_TRUE(c.set_root(v).ok());
  });
  auto c = must(Container::open(path_));
  auto* v = c->root<Vector<uint64_t>>();
  ASSERT_EQ(v->size(), 20000u);
  for (uint64_t i = 0; i < v->size(); i++) ASSERT_EQ((*v)[i], i * 3);
  v->push_back(7);  // the allocator stored in the vector works in the new session
  EXPECT_EQ(v->back(), 7u);
  expect_clean(*c);
}

TEST_F(AllocatorTest, StringSurvivesCommitAndReopen) {
  const std::string long_text(5000, 'x');
  create_and_commit([&](Container& c) {
    auto* s = *c.make<Vector<String>>(allocator<String>(c));
    s->emplace_back("short", s->get_allocator());
    s->emplace_back(long_text.c_str(), s->get_allocator());
    ASSERT_TRUE(c.set_root(s).ok());
  });
  auto c = must(Container::open(path_));
  auto* s = c->root<Vector<String>>();
  ASSERT_EQ(s->size(), 2u);
  EXPECT_EQ((*s)[0], "short");
  EXPECT_EQ((*s)[1].size(), 5000u);
  EXPECT_EQ(std::string((*s)[1].c_str()), long_text);
  (*s)[0] += " and now much longer than the inline buffer";
  EXPECT_EQ((*s)[0], "short and now much longer than the inline buffer");
  expect_clean(*c);
}

TEST_F(AllocatorTest, MapOfStringsSurvivesCommitAndReopen) {
  using M = Map<uint64_t, String>;
  create_and_commit([](Container& c) {
    auto* m = *c.make<M>(allocator<char>(c));
    for (uint64_t k = 0; k < 1000; k++) m->emplace(k, String(text(k).c_str(), m->get_allocator()));
    for (uint64_t k = 0; k < 1000; k += 3) m->erase(k);
    ASSERT_TRUE(c.set_root(m).ok());
  });
  auto c = must(Container::open(path_));
  auto* m = c->root<M>();
  ASSERT_EQ(m->size(), 666u);
  for (uint64_t k = 0; k < 1000; k++) {
    auto it = m->find(k);
    if (k % 3 == 0) {
      EXPECT_EQ(it, m->end());
    } else {
      ASSERT_NE(it, m->end());
      EXPECT_EQ(it->second, text(k).c_str());
    }
  }
  m->emplace(1000, String("new", m->get_allocator()));
  EXPECT_EQ(m->size(), 667u);
  expect_clean(*c);
}

TEST_F(AllocatorTest, FlatMapSurvivesCommitAndReopen) {
  using M = FlatMap<uint64_t, uint64_t>;
  create_and_commit([](Container& c) {
    auto* m = *c.make<M>(allocator<char>(c));
    for (uint64_t k = 5000; k > 0; k--) (*m)[k] = k * k;  // inserts at the front: shifts
    ASSERT_TRUE(c.set_root(m).ok());
  });
  auto c = must(Container::open(path_));
  auto* m = c->root<M>();
  ASSERT_EQ(m->size(), 5000u);
  uint64_t k = 1;
  for (const auto& [key, value] : *m) {
    ASSERT_EQ(key, k);
    ASSERT_EQ(value, k * k);
    k++;
  }
  expect_clean(*c);
}

TEST_F(AllocatorTest, DequeSurvivesCommitAndReopen) {
  using D = Deque<uint64_t>;
  create_and_commit([](Container& c) {
    auto* d = *c.make<D>(allocator<char>(c));
    for (uint64_t i = 0; i < 10000; i++) {
      d->push_back(i);
      d->push_front(i);
    }
    for (int i = 0; i < 500; i++) d->pop_front();
    ASSERT_TRUE(c.set_root(d).ok());
  });
  auto c = must(Container::open(path_));
  auto* d = c->root<D>();
  ASSERT_EQ(d->size(), 19500u);
  EXPECT_EQ(d->front(), 9499u);
  EXPECT_EQ(d->back(), 9999u);
  EXPECT_EQ((*d)[9499], 0u);
  EXPECT_EQ((*d)[9500], 0u);
  expect_clean(*c);
}

TEST_F(AllocatorTest, UnorderedMapSurvivesCommitAndReopen) {
  using M = UnorderedMap<uint64_t, uint64_t>;
  create_and_commit([](Container& c) {
    auto* m = *c.make<M>(allocator<char>(c));
    for (uint64_t k = 0; k < 5000; k++) (*m)[k * 7919] = k;  // several rehashes
    for (uint64_t k = 0; k < 5000; k += 2) m->erase(k * 7919);
    ASSERT_TRUE(c.set_root(m).ok());
  });
  auto c = must(Container::open(path_));
  auto* m = c->root<M>();
  ASSERT_EQ(m->size(), 2500u);
  for (uint64_t k = 0; k < 5000; k++) EXPECT_EQ(m->count(k * 7919), k % 2);
  expect_clean(*c);
}

// Elements that allocate get the container's allocator from the map itself.
TEST_F(AllocatorTest, ScopedAllocatorAdaptorBuildsNestedStrings) {
  using A = boost::container::scoped_allocator_adaptor<allocator<std::pair<const String, String>>>;
  using M = boost::container::map<String, String, std::less<>, A>;
  create_and_commit([](Container& c) {
    auto* m = *c.make<M>(A(allocator<char>(c)));
    for (uint64_t k = 0; k < 300; k++) m->emplace(text(k).c_str(), text(k + 1).c_str());
    ASSERT_TRUE(c.set_root(m).ok());
  });
  auto c = must(Container::open(path_));
  auto* m = c->root<M>();
  ASSERT_EQ(m->size(), 300u);
  auto it = m->find(std::string_view(text(17)));
  ASSERT_NE(it, m->end());
  EXPECT_EQ(it->second, text(18).c_str());
  expect_clean(*c);
}

TEST_F(AllocatorTest, AbortRollsBackPushBackAfterCommit) {
  auto c = must(Container::create(path_, small()));
  auto* v = *c->make<Vector<uint64_t>>(allocator<uint64_t>(*c));
  v->assign(100, 1);
  ASSERT_TRUE(c->set_root(v).ok());
  ASSERT_TRUE(c->commit().ok());
  const uint64_t blocks = c->info().blocks;
  for (uint64_t i = 0; i < 1000; i++) v->push_back(i);  // reallocates
  (*v)[0] = 42;
  ASSERT_TRUE(c->abort().ok());
  ASSERT_EQ(v->size(), 100u);
  EXPECT_EQ((*v)[0], 1u);
  EXPECT_EQ(c->info().blocks, blocks);  // the new buffer was never allocated
  v->push_back(5);                      // and the vector still works
  ASSERT_TRUE(c->commit().ok());
  c.reset();
  c = must(Container::open(path_));
  EXPECT_EQ(c->root<Vector<uint64_t>>()->size(), 101u);
  expect_clean(*c);
}

TEST_F(AllocatorTest, AbortRollsBackMapInsertsAndErases) {
  using M = Map<uint64_t, String>;
  auto c = must(Container::create(path_, small()));
  auto* m = *c->make<M>(allocator<char>(*c));
  for (uint64_t k = 0; k < 200; k++) m->emplace(k, String(text(k).c_str(), m->get_allocator()));
  ASSERT_TRUE(c->set_root(m).ok());
  ASSERT_TRUE(c->commit().ok());
  for (uint64_t k = 0; k < 200; k += 2) m->erase(k);
  for (uint64_t k = 200; k < 400; k++) m->emplace(k, String("gone", m->get_allocator()));
  m->at(1).assign("changed");
  ASSERT_TRUE(c->abort().ok());
  ASSERT_EQ(m->size(), 200u);
  for (uint64_t k = 0; k < 200; k++) ASSERT_EQ(m->at(k), text(k).c_str());
  expect_clean(*c);
}

TEST_F(AllocatorTest, DestroyedContainersReturnEveryBlock) {
  auto c = must(Container::create(path_, small()));
  const uint64_t blocks = c->info().blocks;
  {
    allocator<char> a(*c);
    Map<uint64_t, String> m(a);  // the map itself on the stack
    for (uint64_t k = 0; k < 500; k++) m.emplace(k, String(text(k).c_str(), a));
    Deque<uint64_t> d(a);
    d.resize(100000);
    EXPECT_GT(c->info().blocks, blocks + 500);
  }
  EXPECT_EQ(c->info().blocks, blocks);
}

TEST_F(AllocatorTest, FullContainerThrowsBadAllocAndLeavesVectorAlone) {
  Options o = small();
  o.max_size = 1ull << 30;
  auto c = must(Container::create(path_, o));
  allocator<uint64_t> a(*c);
  Vector<uint64_t> v(a);
  v.assign(10, 3);
  EXPECT_THROW(v.reserve(uint64_t{1} << 28), std::bad_alloc);  // 2 GiB
  EXPECT_EQ(v.size(), 10u);
  EXPECT_EQ(v[9], 3u);
}

TEST_F(AllocatorTest, ThrowsBadAllocOnceTheContainerIsClosed) {
  auto c = must(Container::create(path_, small()));
  allocator<uint64_t> a(*c);
  c.reset();
  EXPECT_EQ(a.container(), nullptr);
  EXPECT_THROW((void)a.allocate(1), std::bad_alloc);
}

TEST_F(AllocatorTest, AllocatorsAreEqualWithinOneContainerOnly) {
  auto c1 = must(Container::create(path_, small()));
  auto c2 = must(Container::create(dir_.file("d.pm"), small()));
  allocator<uint64_t> a1(*c1), a2(*c2);
  allocator<char> rebound(a1);
  EXPECT_TRUE(a1 == allocator<uint64_t>(*c1));
  EXPECT_TRUE(rebound == a1);
  EXPECT_FALSE(a1 == a2);
  EXPECT_EQ(a1.container(), c1.get());
  EXPECT_EQ(a2.container(), c2.get());
  // Memory comes from the allocator's container, wherever the copy lives.
  auto* in_c2 = *c2->make<allocator<uint64_t>>(a1);
  allocator<uint64_t>::pointer p = in_c2->allocate(4);
  EXPECT_TRUE(c1->contains(p.get()));
  in_c2->deallocate(p, 4);
}

// Character and byte buffers are data blocks (allocator.h, "Pointer-free
// blocks"); nodes and buffers of other types are objects.
TEST_F(AllocatorTest, CharacterBuffersAreDataBlocksAndNodesAreObjects) {
  auto c = must(Container::create(path_, small()));
  auto kind_of = [&](const void* p) {
    Result<BlockInfo> b = c->find_block(p);
    EXPECT_TRUE(b.ok()) << b.status().to_string();
    return b.ok() ? b->kind : AllocKind::kObject;
  };
  using M = Map<String, uint64_t>;
  auto* m = *c->make<M>(allocator<char>(*c));
  m->emplace(String(std::string(100, 'k').c_str(), m->get_allocator()), 1);
  auto it = m->begin();
  EXPECT_EQ(kind_of(it->first.data()), AllocKind::kData);  // the characters
  EXPECT_EQ(kind_of(&*it), AllocKind::kObject);            // the node
  EXPECT_EQ(kind_of(m), AllocKind::kObject);
  auto* chars = *c->make<Vector<char>>(allocator<char>(*c));
  chars->resize(50000);  // a page run
  auto* bytes = *c->make<Vector<std::byte>>(allocator<std::byte>(*c));
  bytes->resize(10);
  auto* uchars = *c->make<Vector<unsigned char>>(allocator<unsigned char>(*c));
  uchars->resize(10);
  auto* words = *c->make<Vector<uint64_t>>(allocator<uint64_t>(*c));
  words->resize(10);
  EXPECT_EQ(kind_of(chars->data()), AllocKind::kData);
  EXPECT_EQ(kind_of(bytes->data()), AllocKind::kData);
  EXPECT_EQ(kind_of(uchars->data()), AllocKind::kData);
  EXPECT_EQ(kind_of(words->data()), AllocKind::kObject);
  // Raw storage for objects is allocated as an array of another type.
  allocator<std::max_align_t> raw(*c);
  allocator<std::max_align_t>::pointer p = raw.allocate(4);
  EXPECT_EQ(kind_of(p.get()), AllocKind::kObject);
  raw.deallocate(p, 4);
  ASSERT_TRUE(c->commit().ok());
  expect_clean(*c);
}

// allocator<T>'s type is part of the type tag of every named object made
// with a Boost container over it (named.h): files made by earlier builds
// find their objects only while it stays the same type.
TEST(AllocatorTypeTest, TypeIsWhatEarlierBuildsTagged) {
  EXPECT_STREQ(typeid(allocator<char>).name(), "N2pm9allocatorIcEE");
}

// zero_unused clears a short string's buffer past its terminator and leaves
// long strings (and the characters) alone.
TEST_F(AllocatorTest, ZeroUnusedClearsTheShortStringBuffer) {
  auto c = must(Container::create(path_, small()));
  allocator<char> a(*c);
  for (const char* text :
       {"", "to", "counts", "twenty-two characters", "a longer string, in a buffer of its own"}) {
    alignas(String) unsigned char raw[sizeof(String)];
    std::memset(raw, 0x7f, sizeof raw);
    auto* s = new (raw) String(text, a);
    zero_unused(*s);
    EXPECT_EQ(*s, text);
    const char* d = s->data();
    auto* begin = reinterpret_cast<char*>(raw);
    bool inside = d >= begin && d < begin + sizeof raw;
    if (inside) {
      for (size_t i = s->size(); i <= s->capacity(); i++) EXPECT_EQ(d[i], 0) << text << " " << i;
    } else {
      EXPECT_GT(s->size(), 22u);
    }
    s->~String();
  }
  std::string plain("short");
  zero_unused(plain);
  EXPECT_EQ(plain, "short");
  EXPECT_EQ(plain.c_str()[plain.capacity()], 0);
}

// Named objects work with every tracker but hints (named.h).
class NamedTest : public AllocatorTest {};

// Fills this much of the stack below the caller with addresses of the
// stack, as a program's calls leave it.
[[gnu::noinline]] void leave_stack_addresses() {
  volatile uintptr_t junk[1024];
  for (auto& j : junk) j = reinterpret_cast<uintptr_t>(&j);
}

// The index keeps no stale bytes: a commit right after find_or_construct
// passes check_escapes_at_commit, and pm check (foreign_writer) finds
// nothing, for short and long names, with the stack and the reused heap
// memory full of stack addresses.
TEST_F(NamedTest, IndexHoldsNoStaleBytesAfterFindOrConstruct) {
  Options o = small();
  o.check_escapes_at_commit = true;
  auto c = must(Container::create(path_, o));
  std::vector<void*> junk;
  for (uint64_t n = 8; n < 400; n += 8) {
    auto* p = static_cast<uintptr_t*>(*c->alloc(n));
    c->will_write(p, n);
    for (uint64_t i = 0; i < n / 8; i++) p[i] = reinterpret_cast<uintptr_t>(&o) + i;
    junk.push_back(p);
  }
  for (void* p : junk) ASSERT_TRUE(c->free(p).ok());
  for (const char* name : {"a", "counts", "twenty-one characters", "twenty-two characters.",
                           "a name longer than the short-string buffer"}) {
    leave_stack_addresses();
    Result<uint64_t*> v = find_or_construct<uint64_t>(*c, name, uint64_t{1});
    ASSERT_TRUE(v.ok()) << v.status().to_string();
    Status s = c->commit();
    ASSERT_TRUE(s.ok()) << name << ": " << s.to_string();
  }
  CheckReport r = c->check(/*foreign_writer=*/true);
  EXPECT_TRUE(r.problems.empty());
  EXPECT_TRUE(r.escaping.empty()) << r.escaping.size() << " escaping, first at offset "
                                  << r.escaping[0].offset << " -> " << std::hex
                                  << r.escaping[0].target;
}

TEST_F(NamedTest, FindOrConstructCreatesOnceAndFindsAcrossReopen) {
  using M = Map<uint64_t, uint64_t>;
  {
    auto c = must(Container::create(path_, small()));
    Result<M*> m = find_or_construct<M>(*c, "counts", allocator<char>(*c));
    ASSERT_TRUE(m.ok()) << m.status().to_string();
    (**m)[1] = 10;
    Result<M*> again = find_or_construct<M>(*c, "counts", allocator<char>(*c));
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(*again, *m);
    ASSERT_TRUE(find_or_construct<uint64_t>(*c, "answer", uint64_t{42}).ok());
    ASSERT_TRUE(c->commit().ok());
  }
  auto c = must(Container::open(path_));
  Result<M*> m = find<M>(*c, "counts");
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  EXPECT_EQ((**m)[1], 10u);
  Result<uint64_t*> answer = find<uint64_t>(*c, "answer");
  ASSERT_TRUE(answer.ok());
  EXPECT_EQ(**answer, 42u);
  Result<uint64_t*> existing = find_or_construct<uint64_t>(*c, "answer", uint64_t{7});
  ASSERT_TRUE(existing.ok());
  EXPECT_EQ(**existing, 42u);  // found, not constructed again
  expect_clean(*c);
}

TEST_F(NamedTest, FindOfMissingNameIsNotFound) {
  auto c = must(Container::create(path_, small()));
  EXPECT_TRUE(find<uint64_t>(*c, "nothing").status().is_not_found());  // no index yet
  ASSERT_TRUE(find_or_construct<uint64_t>(*c, "something", uint64_t{1}).ok());
  EXPECT_TRUE(find<uint64_t>(*c, "nothing").status().is_not_found());
  EXPECT_TRUE(destroy<uint64_t>(*c, "nothing").is_not_found());
}

TEST_F(NamedTest, EmptyNameIsInvalidArgument) {
  auto c = must(Container::create(path_, small()));
  EXPECT_EQ(find_or_construct<uint64_t>(*c, "").status().code(), Code::kInvalidArgument);
  EXPECT_EQ(find<uint64_t>(*c, "").status().code(), Code::kInvalidArgument);
  EXPECT_EQ(destroy<uint64_t>(*c, "").code(), Code::kInvalidArgument);
}

TEST_F(NamedTest, AnotherTypeIsInvalidArgumentAndLeftAlone) {
  auto c = must(Container::create(path_, small()));
  ASSERT_TRUE(find_or_construct<uint64_t>(*c, "x", uint64_t{5}).ok());
  EXPECT_EQ(find<double>(*c, "x").status().code(), Code::kInvalidArgument);  // same size
  EXPECT_EQ(find<uint32_t>(*c, "x").status().code(), Code::kInvalidArgument);
  EXPECT_EQ(find_or_construct<int64_t>(*c, "x").status().code(), Code::kInvalidArgument);
  EXPECT_EQ(destroy<double>(*c, "x").code(), Code::kInvalidArgument);
  EXPECT_EQ(**find<uint64_t>(*c, "x"), 5u);
}

TEST_F(NamedTest, DestroyRunsDestructorFreesAndForgetsTheName) {
  using V = Vector<uint64_t>;
  {
    auto c = must(Container::create(path_, small()));
    ASSERT_TRUE(find_or_construct<uint64_t>(*c, "keep", uint64_t{1}).ok());
    ASSERT_TRUE(c->commit().ok());
    const uint64_t blocks = c->info().blocks;
    Result<V*> v = find_or_construct<V>(*c, "big", size_t{50000}, uint64_t{9}, allocator<char>(*c));
    ASSERT_TRUE(v.ok()) << v.status().to_string();
    ASSERT_TRUE(c->commit().ok());
    ASSERT_TRUE(destroy<V>(*c, "big").ok());
    EXPECT_EQ(c->info().blocks, blocks);  // object, its buffer and its name
    EXPECT_TRUE(find<V>(*c, "big").status().is_not_found());
    ASSERT_TRUE(c->commit().ok());
  }
  auto c = must(Container::open(path_));
  EXPECT_TRUE(find<V>(*c, "big").status().is_not_found());
  EXPECT_TRUE(find<uint64_t>(*c, "keep").ok());
  expect_clean(*c);
}

TEST_F(NamedTest, ManyMoreObjectsThanNamedRoots) {
  {
    auto c = must(Container::create(path_, small()));
    for (uint64_t i = 0; i < 500; i++) {
      std::string name = "object number " + std::to_string(i) + " with a long name" + text(i);
      ASSERT_TRUE(find_or_construct<uint64_t>(*c, name, i).ok()) << i;
    }
    ASSERT_TRUE(c->commit().ok());
  }
  auto c = must(Container::open(path_));
  for (uint64_t i = 0; i < 500; i++) {
    std::string name = "object number " + std::to_string(i) + " with a long name" + text(i);
    Result<uint64_t*> p = find<uint64_t>(*c, name);
    ASSERT_TRUE(p.ok()) << p.status().to_string();
    EXPECT_EQ(**p, i);
  }
  expect_clean(*c);
}

TEST_F(NamedTest, AbortDropsObjectsCreatedSinceCommit) {
  auto c = must(Container::create(path_, small()));
  ASSERT_TRUE(find_or_construct<uint64_t>(*c, "old", uint64_t{1}).ok());
  ASSERT_TRUE(c->commit().ok());
  ASSERT_TRUE(find_or_construct<uint64_t>(*c, "new", uint64_t{2}).ok());
  ASSERT_TRUE(destroy<uint64_t>(*c, "old").ok());
  ASSERT_TRUE(c->abort().ok());
  EXPECT_TRUE(find<uint64_t>(*c, "new").status().is_not_found());
  ASSERT_TRUE(find<uint64_t>(*c, "old").ok());
  EXPECT_EQ(**find<uint64_t>(*c, "old"), 1u);
  expect_clean(*c);
}

TEST_F(NamedTest, FullContainerIsNoSpaceAndKeepsNoBlocks) {
  using V = Vector<uint64_t>;
  Options o = small();
  o.max_size = 1ull << 30;
  auto c = must(Container::create(path_, o));
  ASSERT_TRUE(find_or_construct<uint64_t>(*c, "first", uint64_t{1}).ok());  // the index exists
  const uint64_t blocks = c->info().blocks;
  Result<V*> v =
      find_or_construct<V>(*c, "huge", size_t{1} << 28, uint64_t{0}, allocator<char>(*c));
  EXPECT_EQ(v.status().code(), Code::kNoSpace) << v.status().to_string();
  EXPECT_EQ(c->info().blocks, blocks);
  EXPECT_TRUE(find<V>(*c, "huge").status().is_not_found());
}

TEST(NamedHintsTest, ChangesAreNotSupportedWithTheHintsTracker) {
  test::TempDir dir;
  Options o = small();
  o.tracker = TrackerKind::kHints;
  auto c = must(Container::create(dir.file("h.pm"), o));
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(find_or_construct<uint64_t>(*c, "x", uint64_t{1}).status().code(), Code::kNotSupported);
  EXPECT_TRUE(find<uint64_t>(*c, "x").status().is_not_found());
  EXPECT_EQ(destroy<uint64_t>(*c, "x").code(), Code::kNotFound);
}

// An object that exists is refused too: a program changes what it finds
// or makes, and under hints its changes to a Boost container were lost
// with every commit succeeding (a user trial). A read-only open, whose
// tracker is hints, may still find it, with either call.
TEST(NamedHintsTest, AnExistingObjectIsRefusedToTheHintsTrackerButFoundReadOnly) {
  if (test::hints_only()) GTEST_SKIP() << "needs the uffd or mprotect tracker to make it";
  test::TempDir dir;
  const std::string path = dir.file("h.pm");
  {
    auto c = must(Container::create(path, small()));
    ASSERT_TRUE(find_or_construct<uint64_t>(*c, "x", uint64_t{7}).ok());
    ASSERT_TRUE(c->commit().ok());
  }
  Options hints = small();
  hints.tracker = TrackerKind::kHints;
  {
    auto c = must(Container::open(path, hints));
    EXPECT_EQ(find_or_construct<uint64_t>(*c, "x", uint64_t{1}).status().code(),
              Code::kNotSupported);
    ASSERT_TRUE(find<uint64_t>(*c, "x").ok());
  }
  Options ro = small();
  ro.read_only = true;
  auto c = must(Container::open(path, ro));
  Result<uint64_t*> x = find_or_construct<uint64_t>(*c, "x", uint64_t{1});
  ASSERT_TRUE(x.ok()) << x.status().to_string();
  EXPECT_EQ(**x, 7u);
}

// --- SIGKILL: a child changes a persistent map and deque and commits in a
// loop, acknowledging each commit through a pipe; the parent kills it at
// random moments and checks the reopened state is exactly the last
// acknowledged commit or the one in flight.

constexpr uint64_t kWindow = 64;  // keys kept in the map
constexpr uint64_t kTouch = 25;   // iteration n rewrites the value of key n - kTouch
constexpr uint64_t kRecent = 100;

struct KillState {
  explicit KillState(const allocator<char>& a) : map(a), recent(a) {}
  uint64_t iteration = 0;
  Map<uint64_t, String> map;
  Deque<uint64_t> recent;  // the last kRecent iteration numbers
};

std::string touched(uint64_t k) { return "touched " + text(k) + text(k); }

// The map after iteration n.
std::map<uint64_t, std::string> model_map(uint64_t n) {
  std::map<uint64_t, std::string> m;
  for (uint64_t k = n > kWindow ? n - kWindow + 1 : 1; k <= n; k++) {
    m[k] = k + kTouch <= n ? touched(k) : text(k);
  }
  return m;
}

void apply_iteration(KillState& s, uint64_t n) {
  s.map.emplace(n, String(text(n).c_str(), s.map.get_allocator()));
  if (n > kWindow) s.map.erase(n - kWindow);
  if (n > kTouch) s.map.at(n - kTouch).assign(touched(n - kTouch).c_str());
  s.recent.push_back(n);
  if (s.recent.size() > kRecent) s.recent.pop_front();
  s.iteration = n;
}

// Changes that the child aborts: none may ever be seen.
void apply_junk(KillState& s, uint64_t n) {
  for (uint64_t k = 0; k < 20; k++) {
    s.map.emplace(1000000 + k, String("junk junk junk junk junk junk", s.map.get_allocator()));
  }
  s.map.erase(n);
  s.recent.push_front(0);
  s.iteration = ~uint64_t{0};
}

[[noreturn]] void run_kill_child(const std::string& path, int ack_fd) {
  try {
    auto r = Container::open(path);
    if (!r.ok()) _exit(3);
    Container& c = **r;
    auto* s = c.root<KillState>();
    uint64_t ready = 0;
    (void)!write(ack_fd, &ready, 8);
    for (;;) {
      uint64_t n = s->iteration + 1;
      apply_iteration(*s, n);
      if (!c.commit().ok()) _exit(4);
      (void)!write(ack_fd, &n, 8);
      if (n % 4 == 0) {
        apply_junk(*s, n);
        if (!c.abort().ok()) _exit(5);
      }
    }
  } catch (...) {
    _exit(6);
  }
}

void expect_state(Container& c, uint64_t n) {
  auto* s = c.root<KillState>();
  ASSERT_NE(s, nullptr);
  ASSERT_EQ(s->iteration, n);
  std::map<uint64_t, std::string> want = model_map(n);
  ASSERT_EQ(s->map.size(), want.size()) << "iteration " << n;
  for (const auto& [k, v] : s->map) ASSERT_EQ(v, want.at(k).c_str()) << "key " << k;
  std::vector<uint64_t> recent(s->recent.begin(), s->recent.end());
  std::vector<uint64_t> want_recent;
  for (uint64_t i = n > kRecent ? n - kRecent + 1 : 1; i <= n; i++) want_recent.push_back(i);
  ASSERT_EQ(recent, want_recent);
  CheckReport r = c.check();
  ASSERT_TRUE(r.problems.empty()) << r.problems.front();
}

// Returns the last iteration the child acknowledged, at least `from`.
uint64_t kill_child_at_random(const std::string& path, std::mt19937_64& rng, uint64_t from) {
  int fds[2];
  EXPECT_EQ(pipe(fds), 0);
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    run_kill_child(path, fds[1]);
  }
  close(fds[1]);
  uint64_t v;
  EXPECT_EQ(read(fds[0], &v, 8), 8) << "child failed to open";
  std::this_thread::sleep_for(std::chrono::microseconds(rng() % 20000));
  kill(pid, SIGKILL);
  int status;
  waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFSIGNALED(status)) << "child exited with " << WEXITSTATUS(status);
  uint64_t acked = from;
  while (read(fds[0], &v, 8) == 8) acked = v;
  close(fds[0]);
  return acked;
}

TEST_F(AllocatorTest, KilledChildLeavesLastAcknowledgedOrInFlightCommit) {
  create_and_commit(
      [](Container& c) { ASSERT_TRUE(c.set_root(*c.make<KillState>(allocator<char>(c))).ok()); });
  std::mt19937_64 rng(2024);
  uint64_t n = 0, in_flight_durable = 0;
  for (int round = 0; round < 48; round++) {
    uint64_t acked = kill_child_at_random(path_, rng, n);
    ASSERT_FALSE(HasFailure()) << "round " << round;
    auto c = must(Container::open(path_));
    ASSERT_NE(c, nullptr);
    n = c->root<KillState>()->iteration;
    ASSERT_GE(n, acked) << "lost an acknowledged commit in round " << round;
    ASSERT_LE(n, acked + 1) << "round " << round;
    in_flight_durable += n - acked;
    expect_state(*c, n);
    if (HasFatalFailure()) return;
  }
  std::printf("boost kill test: 48 rounds, %llu iterations, %llu in-flight commits durable\n",
              static_cast<unsigned long long>(n),
              static_cast<unsigned long long>(in_flight_durable));
}

}  // namespace
}  // namespace pm
