#include "crash/libpm_workloads.h"

#include <xxhash.h>

#include <algorithm>
#include <cstring>

#include "crash/sim_persist.h"
#include "libpm/superblock.h"

namespace pm::crash {

namespace {

template <typename T>
void put(Container& c, T* p, T v) {
  c.will_write(p, sizeof v);
  *p = v;
}

class MutationWorkload final : public Workload {
 public:
  explicit MutationWorkload(bool full) : full_(full), words_(full ? 131072 : 4096) {}
  ~MutationWorkload() override {
    if (full_) SimPersist::set_file_limit(0);
  }
  std::string name() const override { return full_ ? "mutation_full" : "mutation"; }
  // The digest reads the container itself: a recovered one needs nothing.
  Status resume(Container& c, CommitLog&) override {
    c_ = &c;
    if (full_) limit_file(c);
    return Status();
  }

  // The full variant ends its session as a program on a full disk may: a
  // commit too large for any room fails (kNoSpace), having first finished
  // the deferred commit (off pmem), and the program rolls back and closes
  // with nothing pending. The chains then damage the newest header after
  // some closes: an older slot left pending would be replayed (the planted
  // bug finish_marks_newest_only).
  Status close(CommitLog& log) override {
    if (!full_ || c_ == nullptr) return Status();
    auto* w = c_->root<uint64_t>();
    const uint64_t v = w[0] + 1;
    c_->will_write(w, words_ * 8);
    for (uint64_t i = 0; i < words_; i++) w[i] = v + i;
    Status s = log.commit(*c_);
    if (s.code() != Code::kNoSpace) return s;
    PM_TRY(c_->abort());
    // A commit refused for want of room applied nothing (libpm's promise):
    // only the state before it may be recovered.
    log.expect({digest(*c_)});
    return Status();
  }

  Status setup(Container& c, std::mt19937_64&) override {
    c_ = &c;
    if (full_) {
      SimPersist::set_file_limit(0);  // left by the previous run
      room_ = 0;
    }
    Result<void*> p = c.alloc(words_ * 8);
    if (!p.ok()) return p.status();
    c.will_write(*p, words_ * 8);
    std::memset(*p, 0, words_ * 8);
    return c.set_root(*p);
  }

  Status step(Container& c, std::mt19937_64& rng, CommitLog& log) override {
    c_ = &c;
    if (full_ && room_ == 0) limit_file(c);
    auto* w = c.root<uint64_t>();
    int kind = static_cast<int>(rng() % 8);
    if (kind == 0) {  // an aborted transaction
      for (int i = 0; i < 20; i++) put(c, &w[rng() % words_], uint64_t{0xdeadbeef});
      return c.abort();
    }
    if (kind == 1 || (full_ && kind < 4)) {  // a long run of lines
      uint64_t from, n;
      if (full_) {  // up to the journal's room, less 1 KiB (entry, partial lines)
        n = 1 + rng() % std::min(words_, std::max<uint64_t>(room_, 2048) / 8 - 128);
        from = rng() % (words_ - n + 1);
      } else {
        from = rng() % (words_ - 600);
        n = 1 + rng() % 600;
      }
      const uint64_t v = rng();
      c.will_write(&w[from], n * 8);
      for (uint64_t i = 0; i < n; i++) w[from + i] = v + i;
    } else {
      for (uint64_t i = 0, n = 1 + rng() % 6; i < n; i++)
        put(c, &w[rng() % words_], uint64_t{rng()});
    }
    // The full variant counts its commits in its last word, as the
    // allocator's root count does: an older commit replayed over a newer
    // one then always shows.
    if (full_) put(c, &w[words_ - 1], w[words_ - 1] + 1);
    return log.commit(c);
  }

  bool digest_only_reads() const override { return true; }

  uint64_t digest(Container& c) override {
    auto* w = c.root<uint64_t>();
    return w ? XXH3_64bits(w, words_ * 8) : 0;
  }

 private:
  // The full variant: the file may not grow past its size. A long run's
  // journal body fits the journal's room past the heap, but often not
  // above the deferred body of the commit before it (off pmem): such
  // commits finish the deferred commit and take the heap end's room.
  void limit_file(Container& c) {
    const ContainerInfo i = c.info();
    SimPersist::set_file_limit(i.file_bytes);
    room_ = i.file_bytes - (kHeapOffset + i.raw_bytes + i.heap_bytes);
  }

  const bool full_;
  const uint64_t words_;
  uint64_t room_ = 0;         // file bytes past the heap (full variant)
  Container* c_ = nullptr;  // the session's, for close()
};

struct Block {
  Block* next;
  uint64_t size;
  uint64_t stamp;  // also written at the end of the block
};

// Unlinks the index-th block of root's list and frees it.
template <typename Root>
Status remove(Container& c, Root* root, uint64_t index) {
  Block** link = &root->head;
  for (uint64_t i = 0; i < index; i++) link = &(*link)->next;
  Block* gone = *link;
  put(c, link, gone->next);
  put(c, &root->count, root->count - 1);
  return c.free(gone);
}

class AllocatorWorkload final : public Workload {
 public:
  struct Root {
    Block* head;
    uint64_t count;
  };
  std::string name() const override { return "allocator"; }
  // The digest reads the container itself: a recovered one needs nothing.
  Status resume(Container&, CommitLog&) override { return Status(); }

  Status setup(Container& c, std::mt19937_64&) override {
    Result<Root*> r = c.make<Root>(Root{nullptr, 0});
    if (!r.ok()) return r.status();
    return c.set_root(*r);
  }

  Status step(Container& c, std::mt19937_64& rng, CommitLog& log) override {
    Root* root = c.root<Root>();
    int kind = static_cast<int>(rng() % 10);
    // Between 4 and 12 blocks: the heap stays a few MiB (images stay cheap).
    if ((kind < 5 || root->count < 4) && root->count < 12) {
      PM_TRY(add(c, root, rng));
    } else if (kind < 8 && root->count > 0) {
      PM_TRY(remove(c, root, rng() % root->count));
    }
    if (kind == 8 && root->head != nullptr) {  // rewrite a block's stamp
      Block* b = root->head;
      PM_TRY(stamp(c, b, rng()));
    }
    if (kind == 9) {  // allocate and free inside an aborted transaction
      PM_TRY(add(c, root, rng));
      return c.abort();
    }
    return log.commit(c);
  }

  bool digest_only_reads() const override { return true; }

  uint64_t digest(Container& c) override {
    Root* root = c.root<Root>();
    if (root == nullptr) return 0;
    XXH3_state_t* st = XXH3_createState();
    XXH3_64bits_reset(st);
    XXH3_64bits_update(st, &root->count, 8);
    for (Block* b = root->head; b != nullptr; b = b->next) {
      uint64_t tail;
      std::memcpy(&tail, reinterpret_cast<char*>(b) + b->size - 8, 8);
      XXH3_64bits_update(st, &b->size, 16);
      XXH3_64bits_update(st, &tail, 8);
    }
    uint64_t d = XXH3_64bits_digest(st);
    XXH3_freeState(st);
    return d;
  }

 private:
  static uint64_t pick_size(std::mt19937_64& rng) {
    switch (rng() % 8) {
      case 0:
        return 24 + rng() % 100;
      case 1:
        return 128 + rng() % 4000;
      case 2:
        return 4096 + rng() % 30000;
      case 3:
        return 40000 + rng() % 200000;  // page runs
      case 4:
        return (300 << 10) + rng() % (300 << 10);  // makes a 1 MiB heap grow
      default:
        return 24 + rng() % 2000;
    }
  }

  static Status stamp(Container& c, Block* b, uint64_t v) {
    put(c, &b->stamp, v);
    char* tail = reinterpret_cast<char*>(b) + b->size - 8;
    c.will_write(tail, 8);
    std::memcpy(tail, &v, 8);
    return Status();
  }

  static Status add(Container& c, Root* root, std::mt19937_64& rng) {
    uint64_t size = pick_size(rng);
    Result<void*> p = c.alloc(size);
    if (!p.ok()) return p.status();
    auto* b = static_cast<Block*>(*p);
    c.will_write(b, sizeof *b);
    *b = Block{root->head, size, 0};
    PM_TRY(stamp(c, b, rng()));
    put(c, &root->head, b);
    put(c, &root->count, root->count + 1);
    return Status();
  }

};

// Space freed and used again in the next commit: what makes a commit's
// fresh bytes (libpm/journal.h). A scratch commit overwrites a block whole
// and frees it (its bytes are in that commit's journal), and fills and
// frees a new one; the next commits add blocks, often of the size just
// freed, which land where it was, and fill them whole. Large blocks are
// 64-160 KiB, over the size that takes the fresh path off pmem. The digest
// hashes every block whole, after checking each link against the heap.
class ReuseWorkload final : public Workload {
 public:
  struct Root {
    Block* head;
    uint64_t count;
    uint64_t scratches;
  };
  std::string name() const override { return "reuse"; }
  Status resume(Container&, CommitLog&) override { return Status(); }

  Status setup(Container& c, std::mt19937_64&) override {
    Result<Root*> r = c.make<Root>(Root{nullptr, 0, 0});
    if (!r.ok()) return r.status();
    return c.set_root(*r);
  }

  Status step(Container& c, std::mt19937_64& rng, CommitLog& log) override {
    Root* root = c.root<Root>();
    const int kind = static_cast<int>(rng() % 8);
    if (kind < 3) {  // scratch: an old block rewritten, a new one written, both freed
      if (root->count > 0) {
        Block** link = &root->head;
        for (uint64_t i = rng() % root->count; i > 0; i--) link = &(*link)->next;
        Block* b = *link;
        last_freed_ = b->size;
        put(c, link, b->next);
        put(c, &root->count, root->count - 1);
        c.will_write(b, last_freed_);
        std::memset(b, static_cast<int>(rng() & 0xff), last_freed_);
        PM_TRY(c.free(b));
      }
      const uint64_t size = pick_size(rng, true);
      Result<void*> r = c.alloc(size);
      if (!r.ok()) return r.status();
      c.will_write(*r, size);
      std::memset(*r, static_cast<int>(rng() & 0xff), size);
      PM_TRY(c.free(*r));
      put(c, &root->scratches, root->scratches + 1);
    } else if (kind < 6 || root->count == 0) {
      if (root->count >= 6) PM_TRY(remove(c, root, rng() % root->count));
      const uint64_t size = last_freed_ != 0 && rng() % 2 == 0 ? last_freed_
                                                               : pick_size(rng, rng() % 3 != 0);
      Result<void*> r = c.alloc(size);
      if (!r.ok()) return r.status();
      auto* b = static_cast<Block*>(*r);
      c.will_write(b, size);
      std::memset(b, static_cast<int>(rng() & 0xff), size);
      *b = Block{root->head, size, rng()};
      put(c, &root->head, b);
      put(c, &root->count, root->count + 1);
      if (kind == 5) return c.abort();
    } else {
      PM_TRY(remove(c, root, rng() % root->count));
    }
    return log.commit(c);
  }

  bool digest_only_reads() const override { return true; }

  uint64_t digest(Container& c) override {
    Root* root = c.root<Root>();
    if (root == nullptr) return 0;
    uint64_t d = XXH3_64bits(root, sizeof *root);
    uint64_t n = 0;
    for (Block* b = root->head; b != nullptr; b = b->next) {
      // A recovery that lost a block's bytes may leave any link here.
      Result<BlockInfo> info = c.find_block(b);
      if (!info.ok() || info->start != b || info->size < sizeof *b || b->size > info->size ||
          ++n > root->count) {
        return d ^ 0xbadb10c;
      }
      d = XXH3_64bits_withSeed(b, b->size, d);
    }
    return n == root->count ? d : d ^ 0xbadc0417;
  }

 private:
  static uint64_t pick_size(std::mt19937_64& rng, bool large) {
    return large ? (64 << 10) + rng() % (96 << 10) : 24 + rng() % 3000;
  }


  uint64_t last_freed_ = 0;  // the size of the block a scratch step freed
};

}  // namespace

std::unique_ptr<Workload> make_mutation_workload() {
  return std::make_unique<MutationWorkload>(false);
}
std::unique_ptr<Workload> make_mutation_full_workload() {
  return std::make_unique<MutationWorkload>(true);
}
std::unique_ptr<Workload> make_allocator_workload() {
  return std::make_unique<AllocatorWorkload>();
}
std::unique_ptr<Workload> make_reuse_workload() { return std::make_unique<ReuseWorkload>(); }

}  // namespace pm::crash
