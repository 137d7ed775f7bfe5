// Corruption fuzzer: damaged containers and stores never crash or hang a
// tool, and `pm check` flags every mutant on which a read returns data that
// was never written or misses a key the store holds.
//
// Three seed files (a container with lists and named objects, a store with
// keys in its backend, its logs and removed, and a store written through
// the mount's code) are mutated (bit flips anywhere or in the metadata,
// truncation, zeroed and swapped pages, and fields rewritten with their
// checksums fixed up: superblock, journal header, store root, backend
// entries, log records). Each mutant goes through each tool in a child
// process with a time limit: what `pm info`, `pm check`, `pm kv get/ls/stats`
// and a mount (pmfs::Fs, walked as the kernel would) run. A signal, a
// sanitizer report or the time limit is a failure; so is a read of a value
// never written, or a "not found" for a key the store holds, when check
// found nothing wrong. A fourth seed (a store whose keys are all in its
// backend) has each of its chain links zeroed in turn: no key may then read
// as not found, and check must flag each.
//
// PM_FUZZ_MUTANTS sets the mutants per seed (default 1000; the sanitizer
// stage runs fewer through PM_CRASH_QUICK), PM_FUZZ_SEED the first seed.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "crash/fuse_walk.h"
#include "fuse/fs.h"
#include "kv/check.h"
#include "kv/store.h"
#include "kvstore/backend.h"
#include "kvstore/crl.h"
#include "kvstore/planted_bugs.h"
#include "kvstore/store_impl.h"
#include "libpm/heap_layout.h"
#include "libpm/journal.h"
#include "libpm/superblock.h"
#include "pm/container.h"
#include "pm/named.h"
#include "testutil/store_options.h"
#include "testutil/temp_dir.h"

namespace pm {
namespace {

using Bytes = std::vector<std::byte>;
using History = std::map<std::string, std::set<std::string>>;  // every value ever written

Bytes read_file(const std::string& path) {
  Bytes b;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  std::byte buf[1 << 16];
  for (ssize_t n; fd >= 0 && (n = ::read(fd, buf, sizeof buf)) > 0;) b.insert(b.end(), buf, buf + n);
  if (fd >= 0) ::close(fd);
  return b;
}

bool write_file(const std::string& path, const Bytes& b) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return false;
  bool ok = ::write(fd, b.data(), b.size()) == static_cast<ssize_t>(b.size());
  ::close(fd);
  return ok;
}

int scaled(int n) {
  const char* q = std::getenv("PM_CRASH_QUICK");
  return q != nullptr && *q == '1' ? std::max(1, n / 10) : n;
}

kv::StoreOptions store_options() { return test::small_store_options(); }

// ---------------------------------------------------------------- seeds

struct Seed {
  std::string name;
  Bytes bytes;
  History history;   // stores: every key's values ever written
  bool store = false;
  bool mount = false;
  // backend_seed: what it holds of keys "key0" to "key<keys - 1>"
  std::map<std::string, std::string> final;
  int keys = 0;
};

// Each seed is built in a child, so that the parent never maps a container
// (its address must stay free for the children that open mutants).
template <typename F>
bool in_child(F&& fn) {
  pid_t pid = ::fork();
  if (pid == 0) ::_exit(fn() ? 0 : 1);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

Seed container_seed(const std::string& dir) {
  const std::string path = dir + "/container.pm";
  EXPECT_TRUE(in_child([&] {
    Options o;
    o.initial_size = 1 << 20;
    o.max_size = 1ull << 30;
    auto c = Container::create(path, o);
    if (!c.ok()) return false;
    struct Node {
      Node* next;
      uint64_t n;
      char text[40];
    };
    Node* head = nullptr;
    for (uint64_t i = 0; i < 300; i++) {
      Result<Node*> n = (*c)->make<Node>();
      if (!n.ok()) return false;
      (*n)->next = head;
      (*n)->n = i;
      std::snprintf((*n)->text, sizeof (*n)->text, "node %llu", static_cast<unsigned long long>(i));
      head = *n;
      if (i % 50 == 0 && !(*c)->commit().ok()) return false;
    }
    if (!(*c)->set_root(head).ok()) return false;
    if (!find_or_construct<uint64_t>(**c, "counter", 7).ok()) return false;
    return (*c)->commit().ok();
  }));
  return {"container", read_file(path), {}, false, false, {}, 0};
}

Seed store_seed(const std::string& dir) {
  const std::string path = dir + "/store.pm";
  History h;
  // The history is computed the same way in the child and here.
  auto value = [](int i, int round) {
    return "value " + std::to_string(i) + " round " + std::to_string(round) +
           std::string(static_cast<size_t>(i % 7) * 40, '.');
  };
  for (int round = 0; round < 3; round++) {
    for (int i = 0; i < 120; i++) h["key" + std::to_string(i)].insert(value(i, round));
  }
  EXPECT_TRUE(in_child([&] {
    auto s = kv::Store::open(path, store_options());
    if (!s.ok()) return false;
    for (int round = 0; round < 3; round++) {
      for (int i = 0; i < 120; i++) {
        if (!(*s)->put("key" + std::to_string(i), value(i, round)).ok()) return false;
      }
      if (round < 2 && !(*s)->checkpoint().ok()) return false;
    }
    for (int i = 0; i < 120; i += 9) (void)(*s)->remove("key" + std::to_string(i));
    return true;
  }));
  return {"store", read_file(path), h, true, false, {}, 0};
}

Seed mount_seed(const std::string& dir) {
  const std::string path = dir + "/mount.pm";
  History h;
  EXPECT_TRUE(in_child([&] {
    kv::StoreOptions so = store_options();
    so.max_key_bytes = 256;
    auto s = kv::Store::open(path, so);
    if (!s.ok()) return false;
    pmfs::MountOptions mo;
    mo.max_key_bytes = so.max_key_bytes;
    mo.max_value_bytes = so.max_value_bytes;
    pmfs::Fs fs(std::move(*s), mo);
    if (!fs.build_index().ok()) return false;
    fuse_entry_param d;
    if (fs.do_make(pmfs::kRootIno, "dir", S_IFDIR | 0755, 0, "", {0, 0}, &d) != 0) return false;
    for (int i = 0; i < 30; i++) {
      fuse_entry_param e;
      const std::string name = "f" + std::to_string(i), data = "contents of " + name;
      if (fs.do_make(i % 2 ? d.ino : pmfs::kRootIno, name.c_str(), S_IFREG | 0644, 0, "", {0, 0},
                     &e) != 0) {
        return false;
      }
      pmfs::Handle* h = nullptr;
      bool ignored = false;
      const pmfs::Caller root{0, 0};
      if (fs.do_open(e.ino, O_WRONLY, root, &h, &ignored) != 0) return false;
      const bool ok =
          fs.do_write(h, data.data(), data.size(), 0, root, &ignored) == 0 && fs.do_flush(h) == 0;
      fs.do_release(h);
      if (!ok) return false;
    }
    fuse_entry_param l;
    return fs.do_make(d.ino, "link", S_IFLNK | 0777, 0, "../f0", {0, 0}, &l) == 0;
  }));
  return {"mount", read_file(path), h, false, true, {}, 0};
}

// A store whose keys are all in its backend (the last epoch applied every
// log record), so that each get reads its bucket's chain; some removed.
Seed backend_seed(const std::string& dir) {
  const std::string path = dir + "/backend.pm";
  Seed seed{"backend", {}, {}, true, false, {}, 200};
  for (int i = 0; i < seed.keys; i++) {
    const std::string v =
        "value " + std::to_string(i) + std::string(static_cast<size_t>(i % 5) * 30, '.');
    seed.history["key" + std::to_string(i)].insert(v);
    if (i % 9 != 0) seed.final["key" + std::to_string(i)] = v;
  }
  EXPECT_TRUE(in_child([&] {
    auto s = kv::Store::open(path, store_options());
    if (!s.ok()) return false;
    for (const auto& [k, vs] : seed.history) {
      if (!(*s)->put(k, *vs.begin()).ok()) return false;
    }
    if (!(*s)->checkpoint().ok()) return false;
    for (int i = 0; i < seed.keys; i += 9) {
      if (!(*s)->remove("key" + std::to_string(i)).ok()) return false;
    }
    return (*s)->checkpoint().ok();
  }));
  seed.bytes = read_file(path);
  return seed;
}

// ---------------------------------------------------------------- mutations

// A heap pointer's file offset in this image (0 if it is not one).
uint64_t file_off(const Superblock& sb, uint64_t ptr, uint64_t size) {
  if (ptr < sb.base_address) return 0;
  const uint64_t off = sb.heap_offset + (ptr - sb.base_address);
  return off + 64 <= size ? off : 0;
}

template <typename T>
T* at(Bytes& b, uint64_t off) {
  return reinterpret_cast<T*>(b.data() + off);
}

// The file offsets of a store's chain links: each non-empty bucket's head
// and each entry's link to the next (the last one holds its bucket's end
// mark).
std::vector<uint64_t> chain_links(Bytes& m) {
  std::vector<uint64_t> links;
  auto* sb = at<Superblock>(m, 0);
  const auto* hh = at<HeapHeader>(m, sb->heap_offset);
  const uint64_t root_off = file_off(*sb, sb->base_address + hh->root, m.size());
  if (root_off == 0 || root_off + sizeof(kv::BackendRoot) > m.size()) return links;
  const auto* r = at<kv::BackendRoot>(m, root_off);
  const uint64_t buckets = (kv::kSegBuckets << r->level) + r->split;
  for (uint64_t b = 0; b < buckets; b++) {
    const uint64_t seg =
        file_off(*sb, reinterpret_cast<uint64_t>(r->segs[b / kv::kSegBuckets]), m.size());
    if (seg == 0) return {};
    uint64_t off = seg + (b % kv::kSegBuckets) * 8;
    for (int n = 0; n < 1024; n++) {
      const uint64_t v = *at<uint64_t>(m, off);
      if (kv::is_chain_end(reinterpret_cast<const kv::BackendEntry*>(v))) {
        if (n > 0) links.push_back(off);
        break;
      }
      links.push_back(off);
      const uint64_t e = file_off(*sb, v, m.size());
      if (e == 0) break;
      off = e + offsetof(kv::BackendEntry, next);
    }
  }
  return links;
}

// Rewrites a field and fixes up the checksum over it, so that only the
// reader's own validation can tell.
bool rewrite_with_checksum(Bytes& m, const Seed& seed, std::mt19937_64& rng) {
  if (m.size() < 8192) return false;
  auto* sb = at<Superblock>(m, 0);
  switch (rng() % (seed.store ? 4 : 2)) {
    case 0: {  // a superblock field
      uint64_t* f[] = {&sb->heap_offset, &sb->base_address, &sb->max_size, &sb->page_size};
      *f[rng() % 4] ^= uint64_t{1} << (rng() % 48);
      sb->checksum = superblock_checksum(*sb);
      return true;
    }
    case 1: {  // a journal header field, in either slot (format 4 has two)
      auto* jh = at<JournalHeader>(m, rng() % 2 ? kJournalHeaderOffset : kJournalSlot1Offset);
      uint64_t* f[] = {&jh->body_offset, &jh->body_len, &jh->seq, &jh->flags};
      *f[rng() % 4] ^= uint64_t{1} << (rng() % 40);
      if (rng() % 2) jh->state = static_cast<uint32_t>(rng() % 4);
      jh->checksum = journal_header_checksum(*jh);
      return true;
    }
    case 2: {  // a backend entry or root field (entry checksum fixed up)
      const auto* hh = at<HeapHeader>(m, sb->heap_offset);
      const uint64_t root_off = file_off(*sb, sb->base_address + hh->root, m.size());
      if (root_off == 0 || root_off + sizeof(kv::BackendRoot) > m.size()) return false;
      auto* r = at<kv::BackendRoot>(m, root_off);
      if (rng() % 3 == 0) {
        uint64_t* f[] = {&r->count, &r->seq_high, &r->heads[0], &r->level, &r->split,
                         reinterpret_cast<uint64_t*>(&r->segs[0]), &r->session_start[0]};
        *f[rng() % 7] ^= uint64_t{1} << (rng() % 40);
        return true;
      }
      const uint64_t seg = file_off(*sb, reinterpret_cast<uint64_t>(r->segs[0]), m.size());
      if (seg == 0) return false;
      for (int tries = 0; tries < 64; tries++) {
        const uint64_t b = rng() % kv::kSegBuckets;
        const uint64_t e_off =
            file_off(*sb, *at<uint64_t>(m, seg + b * 8), m.size());
        if (e_off == 0) continue;
        auto* e = at<kv::BackendEntry>(m, e_off);
        uint64_t* f64[] = {reinterpret_cast<uint64_t*>(&e->next), &e->seq};
        uint32_t* f32[] = {&e->klen, &e->vlen};
        if (rng() % 2) {
          *f64[rng() % 2] ^= uint64_t{1} << (rng() % 40);
        } else {
          *f32[rng() % 2] ^= 1u << (rng() % 31);
        }
        // Re-seal it as the store would (only if it still fits the image).
        if (kv::entry_key_len(e) + uint64_t{e->vlen} + e_off + 64 < m.size() &&
            kv::entry_has_sum(e) && !kv::entry_is_ghost(e)) {
          const uint64_t sum = kv::entry_checksum(e);
          std::memcpy(e->data + kv::entry_key_len(e) + e->vlen, &sum, 8);
        }
        return true;
      }
      return false;
    }
    default: {  // a log record field (record checksum fixed up)
      for (int tries = 0; tries < 64; tries++) {
        const uint64_t log = rng() % 2, pos = (rng() % ((64 << 10) / 8)) * 8;
        const uint64_t off = kHeapOffset + log * (64 << 10) + pos;
        auto* h = at<kv::RecordHeader>(m, off);
        if (h->magic != kv::kRecordMagic || h->len > (64 << 10) - pos || h->len < 64) continue;
        uint32_t* f[] = {&h->nops, &h->len, &h->session,
                         reinterpret_cast<uint32_t*>(m.data() + off + sizeof *h + 4),
                         reinterpret_cast<uint32_t*>(m.data() + off + sizeof *h + 8)};
        *f[rng() % 5] ^= 1u << (rng() % 20);
        if (h->len > (64 << 10) - pos) return true;  // damaged past fixing: still a mutant
        h->checksum = 0;
        h->checksum = kv::record_checksum(static_cast<uint32_t>(log), m.data() + off, h->len);
        return true;
      }
      return false;
    }
  }
}

// *forged: a field was rewritten and its checksum recomputed over the new
// contents; only crashes and hangs count then (a forgery that stays within
// every limit reads back as it was forged: no checker can tell).
Bytes mutate(const Seed& seed, std::mt19937_64& rng, std::string* how, bool* forged) {
  *forged = false;
  Bytes m = seed.bytes;
  const uint64_t n = m.size();
  const auto* sb = reinterpret_cast<const Superblock*>(seed.bytes.data());
  const uint64_t meta_end = std::min<uint64_t>(n, sb->heap_offset + (64 << 10));
  for (;;) {
    switch (rng() % 7) {
      case 0:
      case 1: {  // bit flips: anywhere, or in the metadata (superblock, logs, heap start)
        const bool meta = rng() % 2;
        const int flips = 1 + static_cast<int>(rng() % 4);
        for (int i = 0; i < flips; i++) {
          const uint64_t off = meta ? rng() % meta_end : rng() % n;
          m[off] ^= static_cast<std::byte>(1u << (rng() % 8));
        }
        *how = meta ? "metadata bit flips" : "bit flips";
        return m;
      }
      case 2:
        m.resize(rng() % 3 == 0 ? (rng() % (n / 4096)) * 4096 : rng() % n);
        *how = "truncated to " + std::to_string(m.size());
        return m;
      case 3: {
        const uint64_t page = rng() % (n / 4096);
        std::memset(m.data() + page * 4096, 0, 4096);
        *how = "page " + std::to_string(page) + " zeroed";
        return m;
      }
      case 4: {
        const uint64_t a = rng() % (n / 4096), b = rng() % (n / 4096);
        std::swap_ranges(m.begin() + static_cast<long>(a * 4096),
                         m.begin() + static_cast<long>(a * 4096 + 4096),
                         m.begin() + static_cast<long>(b * 4096));
        *how = "pages " + std::to_string(a) + " and " + std::to_string(b) + " swapped";
        return m;
      }
      default:
        if (rewrite_with_checksum(m, seed, rng)) {
          *how = "a field rewritten, checksum fixed up";
          *forged = true;
          return m;
        }
    }
  }
}

// ---------------------------------------------------------------- tools

// What a tool run found, sent from the child.
struct Outcome {
  int32_t ok = 0;            // the tool completed without an error
  int32_t flagged = 0;       // check: problems found (or the file refused)
  int32_t never_written = 0;  // reads: a value that was never written came back
  int32_t silent_misses = 0;  // kAllKeys: a key answered "not found", or a scan without it
};

enum class Tool { kInfo, kCheck, kKvRead, kMount, kAllKeys };
const char* tool_name(Tool t) {
  switch (t) {
    case Tool::kInfo:
      return "info";
    case Tool::kCheck:
      return "check";
    case Tool::kKvRead:
      return "kv get/ls/stats";
    case Tool::kMount:
      return "mount walk";
    case Tool::kAllKeys:
      return "get every key, ls";
  }
  return "?";
}

Outcome run_info(const std::string& path) {
  Outcome o;
  auto c = Container::open(path);
  if (!c.ok()) return o;
  (void)(*c)->info();
  o.ok = 1;
  return o;
}

Outcome run_check(const std::string& path) {
  Outcome o;
  auto c = Container::open(path);
  if (!c.ok()) {
    o.flagged = 1;  // the user is told the file is bad
    return o;
  }
  CheckReport r = (*c)->check(true);
  o.flagged = !r.problems.empty();
  if (r.problems.empty() && (*c)->usage().layout == "kvstore") {
    Result<kv::StoreCheck> s = kv::check_store(c->get());
    o.flagged = !s.ok() || !s->problems.empty();
  }
  (void)(*c)->collect(/*dry_run=*/true);
  o.ok = 1;
  return o;
}

Outcome run_kv(const std::string& path, const History& h) {
  Outcome o;
  auto s = kv::Store::open(path, store_options());
  if (!s.ok()) return o;
  auto seen = [&](std::string_view k, std::string_view v) {
    auto it = h.find(std::string(k));
    if (it != h.end() && it->second.count(std::string(v)) != 0) return;
    o.never_written = 1;
    if (std::getenv("PM_FUZZ_VERBOSE")) {
      std::fprintf(stderr, "read %s: '%.60s' (%zu bytes)\n", std::string(k).c_str(),
                   std::string(v).c_str(), v.size());
    }
  };
  for (int i = 0; i < 120; i += 7) {
    std::string v;
    const std::string k = "key" + std::to_string(i);
    const Status st = (*s)->get(k, &v);
    if (st.ok()) seen(k, v);
    if (st.is_not_found() && i % 9 != 0) o.silent_misses++;  // store_seed removed i % 9 == 0
  }
  (void)(*s)->scan("", [&](std::string_view k, std::string_view v) {
    seen(k, v);
    return true;
  });
  (void)(*s)->stats();
  o.ok = 1;
  return o;
}

// Every key of a store whose final contents are known: a get returns the
// final value, or not found for a removed key, or an error; a scan that
// succeeds lists exactly the final keys. Else the damage lost or revived a
// key silently.
Outcome run_all_keys(const std::string& path, const std::map<std::string, std::string>& final,
                     int keys) {
  Outcome o;
  auto s = kv::Store::open(path, store_options());
  if (!s.ok()) return o;
  for (int i = 0; i < keys; i++) {
    const std::string k = "key" + std::to_string(i);
    std::string v;
    const Status st = (*s)->get(k, &v);
    const auto it = final.find(k);
    if (st.ok() && (it == final.end() || v != it->second)) o.never_written = 1;
    if (st.is_not_found() && it != final.end()) o.silent_misses++;
  }
  size_t listed = 0;
  const Status scan = (*s)->scan("", [&](std::string_view k, std::string_view v) {
    const auto it = final.find(std::string(k));
    if (it == final.end() || it->second != v) o.never_written = 1;
    listed++;
    return true;
  });
  if (scan.ok() && listed != final.size()) o.silent_misses++;
  o.ok = 1;
  return o;
}

Outcome run_mount(const std::string& path) {
  Outcome o;
  kv::StoreOptions so = store_options();
  so.max_key_bytes = 256;
  auto s = kv::Store::open(path, so);
  if (!s.ok()) return o;
  pmfs::MountOptions mo;
  mo.max_key_bytes = so.max_key_bytes;
  mo.max_value_bytes = so.max_value_bytes;
  pmfs::Fs fs(std::move(*s), mo);
  if (!fs.build_index().ok()) return o;
  crash::Tree t;
  if (!crash::walk(fs, pmfs::kRootIno, "", &t).ok()) return o;
  // A file was created empty, then written: both were written.
  for (const auto& [p, e] : t) {
    if (e.type != 'F' || e.data.empty() || e.data == "contents of " + p.substr(p.rfind('/') + 1)) {
      continue;
    }
    o.never_written = 1;
    if (std::getenv("PM_FUZZ_VERBOSE")) std::fprintf(stderr, "read %s: '%s'\n", p.c_str(), e.data.c_str());
  }
  o.ok = 1;
  return o;
}

// Runs a tool on a copy of the mutant in a child with a time limit.
// Returns "" and the outcome, or why it failed.
std::string run_tool(Tool tool, const Seed& seed, const Bytes& mutant, const std::string& dir,
                     Outcome* out) {
  const std::string path = dir + "/mutant.pm";
  ::unlink(path.c_str());
  if (!write_file(path, mutant)) return "cannot write the mutant";
  int fds[2];
  if (::pipe(fds) != 0) return "pipe";
  pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    ::alarm(std::getenv("PM_CRASH_QUICK") != nullptr ? 120 : 30);  // a hang dies of SIGALRM
    Outcome o;
    switch (tool) {
      case Tool::kInfo:
        o = run_info(path);
        break;
      case Tool::kCheck:
        o = run_check(path);
        break;
      case Tool::kKvRead:
        o = run_kv(path, seed.history);
        break;
      case Tool::kMount:
        o = run_mount(path);
        break;
      case Tool::kAllKeys:
        o = run_all_keys(path, seed.final, seed.keys);
        break;
    }
    (void)!::write(fds[1], &o, sizeof o);
    ::_exit(42);
  }
  ::close(fds[1]);
  Outcome o;
  const bool got = ::read(fds[0], &o, sizeof o) == static_cast<ssize_t>(sizeof o);
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (WIFSIGNALED(status)) {
    return WTERMSIG(status) == SIGALRM ? "hung (time limit)"
                                       : std::string("died of ") + strsignal(WTERMSIG(status));
  }
  if (!got || !WIFEXITED(status) || WEXITSTATUS(status) != 42) {
    return "exited " + std::to_string(WEXITSTATUS(status)) + " (a sanitizer report?)";
  }
  *out = o;
  return "";
}

struct ToolCounts {
  uint64_t tried = 0, ok = 0, flagged = 0;
};

TEST(CorruptionFuzzTest, DamagedFilesNeverCrashOrHangAToolAndCheckFlagsBadReads) {
  test::TempDir dir;
  fuse_set_log_func([](fuse_log_level, const char*, va_list) {});  // index summaries
  const char* env_n = std::getenv("PM_FUZZ_MUTANTS");
  const int mutants = env_n != nullptr ? std::atoi(env_n) : scaled(1000);
  const char* env_seed = std::getenv("PM_FUZZ_SEED");
  const uint64_t first_seed = env_seed != nullptr ? std::strtoull(env_seed, nullptr, 10) : 1;
  const Seed seeds[] = {container_seed(dir.path()), store_seed(dir.path()),
                        mount_seed(dir.path())};
  std::map<std::string, ToolCounts> counts;
  uint64_t bad_reads = 0, failures = 0;
  for (const Seed& seed : seeds) {
    ASSERT_GT(seed.bytes.size(), 8192u) << seed.name;
    std::vector<Tool> tools = {Tool::kInfo, Tool::kCheck};
    if (seed.store) tools.push_back(Tool::kKvRead);
    if (seed.mount) tools.push_back(Tool::kMount);
    for (int i = 0; i < mutants; i++) {
      const uint64_t s = first_seed + static_cast<uint64_t>(i);
      std::mt19937_64 rng(s * 0x9E3779B97F4A7C15ull + seed.bytes.size());
      std::string how;
      bool forged = false;
      const Bytes m = mutate(seed, rng, &how, &forged);
      Outcome check_outcome;
      std::vector<Outcome> outcomes;
      for (Tool t : tools) {
        Outcome o;
        const std::string why = run_tool(t, seed, m, dir.path(), &o);
        ToolCounts& c = counts[tool_name(t)];
        c.tried++;
        if (!why.empty()) {
          failures++;
          ADD_FAILURE() << seed.name << " mutant PM_FUZZ_SEED=" << s << " (" << how << "): "
                        << tool_name(t) << " " << why;
          continue;
        }
        c.ok += o.ok;
        c.flagged += o.flagged;
        if (t == Tool::kCheck) check_outcome = o;
        outcomes.push_back(o);
      }
      for (const Outcome& o : outcomes) {
        if (!o.never_written && !o.silent_misses) continue;
        bad_reads++;
        if (forged) continue;
        EXPECT_TRUE(check_outcome.flagged)
            << seed.name << " mutant PM_FUZZ_SEED=" << s << " (" << how << "): a read "
            << (o.never_written ? "returned a value never written" : "missed a key it holds")
            << ", and check found nothing";
      }
    }
  }
  std::printf("fuzz: %d mutants per seed (container, store, mount), first seed %llu\n", mutants,
              static_cast<unsigned long long>(first_seed));
  for (const auto& [name, c] : counts) {
    std::printf("  %-16s tried %llu, completed %llu, refused %llu%s\n", name.c_str(),
                static_cast<unsigned long long>(c.tried), static_cast<unsigned long long>(c.ok),
                static_cast<unsigned long long>(c.tried - c.ok),
                name == "check" ? (", flagged " + std::to_string(c.flagged)).c_str() : "");
  }
  std::printf("  reads of never-written values or misses of held keys: %llu (each flagged by "
              "check unless forged); "
              "failures: %llu\n",
              static_cast<unsigned long long>(bad_reads), static_cast<unsigned long long>(failures));
}

// Entries' checksums do not cover their links: a link zeroed by damage
// must read as corruption, never as the end of its chain, which would hide
// every key behind it as "not found" (before format 4 it did). Every link
// of the backend seed is zeroed in turn (a sample of them in the sanitizer
// stage): a get of each key, a scan and check run on each mutant.
struct ZeroedLinks {
  uint64_t mutants = 0, flagged = 0, refused = 0, silent = 0;
};

// Zeroes every `every`-th link of the seed in turn; with `expect_clean`
// each mutant must lose no key silently and be flagged by check.
ZeroedLinks zero_links(const Seed& seed, const std::vector<uint64_t>& links, size_t every,
                       const std::string& dir, bool expect_clean) {
  ZeroedLinks z;
  for (size_t i = 0; i < links.size(); i += every) {
    Bytes m = seed.bytes;
    std::memset(m.data() + links[i], 0, 8);
    const std::string how = "the link at file offset " + std::to_string(links[i]) + " zeroed";
    z.mutants++;
    Outcome reads, check;
    std::string why = run_tool(Tool::kAllKeys, seed, m, dir, &reads);
    if (why.empty()) why = run_tool(Tool::kCheck, seed, m, dir, &check);
    if (!why.empty()) {
      ADD_FAILURE() << how << ": " << why;
      continue;
    }
    z.refused += !reads.ok;
    z.flagged += check.flagged;
    z.silent += reads.silent_misses > 0;
    if (!expect_clean) continue;
    EXPECT_EQ(reads.silent_misses, 0) << how << ": keys read as not found";
    EXPECT_EQ(reads.never_written, 0) << how << ": a value read that the store does not hold";
    EXPECT_TRUE(check.flagged) << how << ": check found nothing";
  }
  return z;
}

TEST(CorruptionFuzzTest, AZeroedChainLinkNeverHidesAKey) {
  test::TempDir dir;
  const Seed seed = backend_seed(dir.path());
  Bytes probe = seed.bytes;
  const std::vector<uint64_t> links = chain_links(probe);
  ASSERT_GT(links.size(), static_cast<size_t>(seed.keys)) << "the seed's chains were not found";
  const size_t every = static_cast<size_t>(10 / scaled(10));  // 1, or 10 when quick
  const ZeroedLinks z = zero_links(seed, links, every, dir.path(), true);
  std::printf("zeroed links: %llu of %zu mutated, %llu flagged by check, %llu stores refused\n",
              static_cast<unsigned long long>(z.mutants), links.size(),
              static_cast<unsigned long long>(z.flagged),
              static_cast<unsigned long long>(z.refused));
  // The reads see the damage: with a zeroed link taken for a chain's end,
  // this test must find keys lost.
  kv::g_kv_planted_bugs.zeroed_link_ends_chain = true;
  const ZeroedLinks planted = zero_links(seed, links, every * 4, dir.path(), false);
  kv::g_kv_planted_bugs.zeroed_link_ends_chain = false;
  EXPECT_GT(planted.silent, 0u) << "the planted bug zeroed_link_ends_chain went unseen";
}

}  // namespace
}  // namespace pm
