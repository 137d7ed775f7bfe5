// Kill test: a child process runs a deterministic workload of transactions
// (slot updates, big updates, allocations, frees, aborts), reporting each
// acknowledged commit through a pipe; the parent SIGKILLs it at a random
// moment, reopens the container and compares it with a model of the same
// workload: the state must be exactly the last acknowledged commit or the one
// in flight (all or nothing), the heap metadata must check clean, and no
// aborted or uncommitted change may be visible. PM_KILL_ROUNDS sets rounds.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "pm/container.h"
#include "testutil/temp_dir.h"

namespace pm {
namespace {

constexpr uint64_t kSlots = 1 << 16;

struct Node {
  Node* next;
  uint64_t value;
  uint64_t size;
};

struct Root {
  uint64_t txn;
  uint64_t* slots;
  Node* list;
  uint64_t list_len;
};

// The workload, as operations both the child and the model apply.
struct Txn {
  std::vector<std::pair<uint64_t, uint64_t>> updates;  // slot, value
  uint64_t big_from = 0, big_len = 0, big_value = 0;
  uint64_t node_size;
  bool remove = false;
  uint64_t remove_index = 0;
  bool abort_first;
};

Txn make_txn(uint64_t i, uint64_t list_len) {
  std::mt19937_64 r(i * 0x9e3779b97f4a7c15ull);
  Txn t;
  for (uint64_t k = 0, n = 1 + r() % 8; k < n; k++) t.updates.push_back({r() % kSlots, r()});
  if (r() % 8 == 0) {
    t.big_len = 1 + r() % (kSlots / 2);
    t.big_from = r() % (kSlots - t.big_len);
    t.big_value = r();
  }
  t.node_size = sizeof(Node) + 8 + r() % 6000;
  if (r() % 16 == 0) t.node_size += r() % (300 << 10);  // sometimes a page run
  if (list_len > 40 && r() % 2 == 0) {
    t.remove = true;
    t.remove_index = r() % list_len;
  }
  t.abort_first = r() % 5 == 0;
  return t;
}

struct Model {
  uint64_t txn = 0;
  std::vector<uint64_t> slots = std::vector<uint64_t>(kSlots);
  std::vector<std::pair<uint64_t, uint64_t>> list;  // value, size (head first)

  void apply(const Txn& t) {
    for (auto [s, v] : t.updates) slots[s] = v;
    for (uint64_t k = 0; k < t.big_len; k++) slots[t.big_from + k] = t.big_value + k;
    list.insert(list.begin(), {txn + 1, t.node_size});
    if (t.remove) list.erase(list.begin() + static_cast<long>(t.remove_index));
    txn++;
  }
};

template <typename T>
void put(Container& c, T* p, T v) {
  c.will_write(p, sizeof v);
  *p = v;
}

// Child: never returns.
[[noreturn]] void run_child(const std::string& path, int ack_fd) {
  auto r = Container::open(path);
  if (!r.ok()) {
    std::fprintf(stderr, "child open: %s\n", r.status().to_string().c_str());
    _exit(3);
  }
  Container& c = **r;
  auto* root = c.root<Root>();
  uint64_t ready = 0;
  (void)!write(ack_fd, &ready, 8);
  std::mt19937_64 junk(static_cast<uint64_t>(getpid()));
  for (;;) {
    Txn t = make_txn(root->txn + 1, root->list_len);
    if (t.abort_first) {  // a transaction that is abandoned
      for (int k = 0; k < 50; k++) put(c, &root->slots[junk() % kSlots], uint64_t{0xdead});
      (void)c.alloc(100);
      put(c, &root->txn, uint64_t{~0ull});
      if (!c.abort().ok()) _exit(4);
    }
    for (auto [s, v] : t.updates) put(c, &root->slots[s], v);
    if (t.big_len) {
      c.will_write(&root->slots[t.big_from], t.big_len * 8);
      for (uint64_t k = 0; k < t.big_len; k++) root->slots[t.big_from + k] = t.big_value + k;
    }
    auto* n = static_cast<Node*>(*c.alloc(t.node_size));
    c.will_write(n, sizeof *n);
    *n = Node{root->list, root->txn + 1, t.node_size};
    char* tail = reinterpret_cast<char*>(n) + t.node_size - 8;  // may be unaligned
    uint64_t value = root->txn + 1;
    c.will_write(tail, 8);
    std::memcpy(tail, &value, 8);
    put(c, &root->list, n);
    put(c, &root->list_len, root->list_len + 1);
    if (t.remove) {
      Node** link = &root->list;
      for (uint64_t k = 0; k < t.remove_index; k++) link = &(*link)->next;
      Node* gone = *link;
      put(c, link, gone->next);
      if (!c.free(gone).ok()) _exit(5);
      put(c, &root->list_len, root->list_len - 1);
    }
    put(c, &root->txn, root->txn + 1);
    if (!c.commit().ok()) _exit(6);
    uint64_t acked = root->txn;
    (void)!write(ack_fd, &acked, 8);
  }
}

void expect_matches(Container& c, const Model& m) {
  auto* root = c.root<Root>();
  ASSERT_NE(root, nullptr);
  ASSERT_EQ(root->txn, m.txn);
  ASSERT_EQ(std::memcmp(root->slots, m.slots.data(), kSlots * 8), 0)
      << "slots differ at txn " << m.txn;
  ASSERT_EQ(root->list_len, m.list.size());
  Node* n = root->list;
  for (auto [value, size] : m.list) {
    ASSERT_NE(n, nullptr);
    ASSERT_EQ(n->value, value);
    ASSERT_EQ(n->size, size);
    uint64_t tail;
    std::memcpy(&tail, reinterpret_cast<char*>(n) + size - 8, 8);
    ASSERT_EQ(tail, value);
    n = n->next;
  }
  ASSERT_EQ(n, nullptr);
  CheckReport r = c.check();
  ASSERT_TRUE(r.problems.empty()) << r.problems.front();
  ASSERT_EQ(r.blocks, m.list.size() + 2);  // + root + slots
}

TEST(KillTest, CommittedStateSurvivesSigkillAndUncommittedVanishes) {
  test::TempDir dir;
  const std::string path = dir.file("kill.pm");
  {
    Options o;
    o.initial_size = 8 << 20;
    o.max_size = 8ull << 30;
    auto c = Container::create(path, o);
    ASSERT_TRUE(c.ok()) << c.status().to_string();
    auto* root = static_cast<Root*>(*(*c)->alloc(sizeof(Root)));
    auto* slots = static_cast<uint64_t*>(*(*c)->alloc(kSlots * 8));
    (*c)->will_write(root, sizeof *root);
    (*c)->will_write(slots, kSlots * 8);
    std::memset(slots, 0, kSlots * 8);
    *root = Root{0, slots, nullptr, 0};
    ASSERT_TRUE((*c)->set_root(root).ok());
    ASSERT_TRUE((*c)->commit().ok());
  }
  const char* env = std::getenv("PM_KILL_ROUNDS");
  const int rounds = env ? std::atoi(env) : 400;
  Model model;
  std::mt19937_64 rng(12345);
  uint64_t replays_in_flight = 0;
  for (int round = 0; round < rounds; round++) {
    int fds[2];
    ASSERT_EQ(pipe(fds), 0);
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      close(fds[0]);
      run_child(path, fds[1]);
    }
    close(fds[1]);
    uint64_t ready;
    ASSERT_EQ(read(fds[0], &ready, 8), 8) << "child failed to open in round " << round;
    std::this_thread::sleep_for(std::chrono::microseconds(rng() % 20000));
    kill(pid, SIGKILL);
    int status;
    waitpid(pid, &status, 0);
    ASSERT_TRUE(WIFSIGNALED(status)) << "child exited with " << WEXITSTATUS(status);
    uint64_t acked = model.txn, v;
    while (read(fds[0], &v, 8) == 8) acked = v;
    close(fds[0]);

    auto c = Container::open(path);
    ASSERT_TRUE(c.ok()) << c.status().to_string();
    uint64_t found = (*c)->root<Root>()->txn;
    // All acknowledged commits are there; at most the one in flight beyond.
    ASSERT_GE(found, acked) << "lost an acknowledged commit in round " << round;
    ASSERT_LE(found, acked + 1) << "round " << round;
    replays_in_flight += found - acked;
    while (model.txn < found) model.apply(make_txn(model.txn + 1, model.list.size()));
    expect_matches(**c, model);
    if (HasFatalFailure()) return;
  }
  std::printf("kill test: %d rounds, %llu transactions, %llu in-flight commits found durable\n",
              rounds, static_cast<unsigned long long>(model.txn),
              static_cast<unsigned long long>(replays_in_flight));
}

}  // namespace
}  // namespace pm
