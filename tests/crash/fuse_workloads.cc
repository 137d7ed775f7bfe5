#include "crash/fuse_workloads.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <xxhash.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "crash/fuse_walk.h"
#include "crash/kv_workloads.h"
#include "fuse/file_content.h"
#include "fuse/fs.h"
#include "fuse/key_names.h"
#include "kv/store.h"
#include "kvstore/store_impl.h"

namespace pm::crash {

namespace {

const pmfs::Caller kRoot{0, 0};  // the workloads run as root

using pmfs::Ino;

kv::StoreOptions store_options() {
  kv::StoreOptions o = crash_store_options();
  o.max_key_bytes = 256;  // paths
  return o;
}

// The store's value limit: larger files are chunks of this size.
const size_t kValue = store_options().max_value_bytes;

pmfs::MountOptions mount_options() {
  pmfs::MountOptions m;
  m.max_key_bytes = store_options().max_key_bytes;
  m.max_value_bytes = store_options().max_value_bytes;
  // Directory renames of more than a key or two take several transactions
  // (fuse/fs_names.cc, move_below): crash points between them.
  m.rename_step_bytes = 600;
  return m;
}

uint64_t digest_of(const Tree& t) {
  // Names of one file are told by the first path of their group.
  std::map<uint64_t, const std::string*> first;
  for (const auto& [path, e] : t) {
    if (e.type != 'D') first.emplace(e.group, &path);
  }
  XXH3_state_t* st = XXH3_createState();
  XXH3_64bits_reset(st);
  for (const auto& [path, e] : t) {
    const std::string& same_as = e.type == 'D' ? path : *first.at(e.group);
    const uint64_t n[6] = {path.size(), e.data.size(), static_cast<uint64_t>(e.type),
                           e.perm,      e.nlink,       same_as.size()};
    XXH3_64bits_update(st, n, sizeof n);
    XXH3_64bits_update(st, path.data(), path.size());
    XXH3_64bits_update(st, e.data.data(), e.data.size());
    XXH3_64bits_update(st, same_as.data(), same_as.size());
    for (const auto& [name, value] : e.xattrs) {
      const uint64_t sizes[2] = {name.size(), value.size()};
      XXH3_64bits_update(st, sizes, sizeof sizes);
      XXH3_64bits_update(st, name.data(), name.size());
      XXH3_64bits_update(st, value.data(), value.size());
    }
  }
  const uint64_t d = XXH3_64bits_digest(st);
  XXH3_freeState(st);
  return d;
}

std::string parent_of(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "" : path.substr(0, slash);
}
std::string name_of(const std::string& path) { return path.substr(path.rfind('/') + 1); }
bool is_below(const std::string& path, const std::string& dir) {
  return path.size() > dir.size() && path.starts_with(dir) && path[dir.size()] == '/';
}
bool has_children(const Tree& t, const std::string& dir) {
  auto it = t.upper_bound(dir + "/");
  return t.contains(dir + "/") || (it != t.end() && is_below(it->first, dir));
}

// Chunk keys no manifest names. Named: every id of any value that reads
// as a manifest (a superset, which could only hide an unnamed chunk, never
// invent one).
Result<std::vector<uint64_t>> unnamed_chunks(kv::Store& store) {
  std::vector<uint64_t> chunks;
  std::set<uint64_t> named;
  PM_TRY(store.scan("", "", 0, [&](std::string_view key, std::string_view value) {
    if (std::optional<uint64_t> id = pmfs::chunk_id(key)) {
      chunks.push_back(*id);
    } else if (std::optional<pmfs::Manifest> m = pmfs::decode_manifest(value)) {
      named.insert(m->ids.begin(), m->ids.end());
    }
    return true;
  }));
  std::erase_if(chunks, [&](uint64_t id) { return named.contains(id); });
  return chunks;
}

// What a mount trusts when the store holds the clean-end mark kCleanKey
// (fuse/fs_index.cc) and no update followed it (the mark is the sequence
// number its put took): no chunk is left that no manifest names, so the
// mount skips the sweep over every key, and any such chunk would stay.
Status check_clean_end(kv::Store& store) {
  std::string mark;
  Status s = store.get(pmfs::kCleanKey, &mark);
  if (s.is_not_found()) return Status();
  PM_TRY(s);
  if (mark.size() != 8) return Status();
  const auto seq = pmfs::get_le<uint64_t>(mark, 0);
  if (store.next_seq() != seq + 1) return Status();  // updates since: not trusted
  Result<std::vector<uint64_t>> left = unnamed_chunks(store);
  if (!left.ok() || left->empty()) return left.status();
  return Status::corruption(fmt::format(
      "the store says its last mount ended cleanly, yet chunk {} is named by no manifest",
      left->front()));
}

// Stable inode numbers (fuse/key_names.h): every number a record holds is
// below the one kInoKey gives next, and no two records hold one, so no
// mount can give a number out twice.
Status check_inos(kv::Store& store) {
  std::string v;
  Status s = store.get(pmfs::kInoKey, &v);
  if (!s.ok() && !s.is_not_found()) return s;
  const uint64_t next = s.ok() && v.size() == 8 ? pmfs::get_le<uint64_t>(v, 0) : pmfs::kRootIno + 1;
  std::set<uint64_t> held;
  Status bad;
  for (std::string_view prefix : {pmfs::kMetaPrefix, pmfs::kDirPrefix}) {
    PM_TRY(store.scan(prefix, kv::Store::prefix_end(prefix), 0,
                      [&](std::string_view key, std::string_view value) {
                        std::optional<pmfs::Meta> m = pmfs::decode_meta(value);
                        if (!m || m->ino == 0) return true;
                        if (m->ino < next && held.insert(m->ino).second) return true;
                        bad = Status::corruption(fmt::format(
                            "record {:?} holds inode number {}, given twice (next: {})",
                            std::string(key), m->ino, next));
                        return false;
                      }));
  }
  return bad;
}

// ------------------------------------------------------------------ the workload

class FuseWorkload final : public Workload {
 public:
  explicit FuseWorkload(bool async) : async_(async), options_(store_options()) {
    fuse_set_log_func([](fuse_log_level, const char*, va_list) {});  // index summaries
    // The mount's default off pmem: a change is durable at the next sync.
    if (async) options_.durability = kv::Durability::kAsync;
  }

  std::string name() const override { return async_ ? "fuse_async" : "fuse"; }
  Options options() const override { return kv::container_options(options_); }
  // The tree model follows acknowledged operations only.
  bool continues_after_failure() const override { return false; }

  Status close(CommitLog&) override {
    fs_.reset();
    store_ = nullptr;
    return Status();
  }

  // A new session: mount the recovered store and take its tree as the model.
  Status resume(Container& c, CommitLog& log) override {
    fs_.reset();
    store_ = nullptr;
    live_ = &c;
    live_generation_ = c.generation();
    PM_TRY(open(c, log));
    model_.clear();
    PM_TRY(walk(*fs_, pmfs::kRootIno, "", &model_));
    durable_ = digest_of(model_);  // what was recovered is on the file
    unsynced_.clear();
    if (async_) log.expect({durable_});
    return Status();
  }

  Status setup(Container& c, std::mt19937_64&) override {
    fs_.reset();
    store_ = nullptr;
    model_.clear();
    live_ = &c;
    live_generation_ = c.generation();
    return kv::format_store(&c, store_options());
  }

  Status step(Container& c, std::mt19937_64& rng, CommitLog& log) override {
    if (fs_ == nullptr) PM_TRY(open(c, log));
    if (async_ && (unsynced_.size() >= kMaxUnsynced || rng() % 10 == 0)) return sync(log);
    const int kind = static_cast<int>(rng() % 26);
    if (kind < 6) return write_file(rng, log);
    if (kind > 23) return xattr(rng, log);
    if (kind == 20) return overwrite(rng, log);
    if (kind > 20) return link(rng, log);
    if (kind < 7) return make_dir(rng, log);
    if (kind < 9) return remove(rng, log);
    if (kind < 12) return rename(rng, log);
    if (kind < 13) return symlink(rng, log);
    if (kind < 14) return chmod(rng, log);
    if (kind < 15) return truncate(rng, log);
    if (kind < 19) {
      const uint64_t n = rng() % 6;
      const bool epoch = rng() % 2 == 0;
      return background(log, [&] {
        Result<uint64_t> g = store_->glean(n);
        if (!g.ok()) return g.status();
        return epoch ? store_->advance_epoch() : Status();
      });
    }
    return background(log, [&] { return store_->checkpoint(); });
  }

  uint64_t digest(Container& c) override {
    if (&c == live_ && c.generation() == live_generation_) return digest_of(model_);
    Result<std::unique_ptr<kv::Store>> s = kv::open_store_on(&c, options_);
    if (!s.ok()) return 0xbad0;
    if (!check_clean_end(**s).ok()) return 0xbad3;
    if (!check_inos(**s).ok()) return 0xbad5;
    kv::Store* store = s->get();
    pmfs::Fs fs(std::move(*s), mount_options());
    if (!fs.build_index().ok()) return 0xbad1;
    // A mount leaves no chunk that no manifest names: it sweeps them, or
    // trusted a mark that says there are none.
    Result<std::vector<uint64_t>> left = unnamed_chunks(*store);
    if (!left.ok() || !left->empty()) return 0xbad4;
    Tree t;
    if (!walk(fs, pmfs::kRootIno, "", &t).ok()) return 0xbad2;
    return digest_of(t);
  }

 private:
  // Opening a store commits a new session: the tree is unchanged.
  Status open(Container& c, CommitLog& log) {
    durable_ = digest_of(model_);
    unsynced_.clear();
    return log.durable(durable_, [&]() -> Status {
      Result<std::unique_ptr<kv::Store>> s = kv::open_store_on(&c, options_);
      if (!s.ok()) return s.status();
      PM_TRY(check_clean_end(**s));
      PM_TRY(check_inos(**s));
      store_ = s->get();
      fs_ = std::make_unique<pmfs::Fs>(std::move(*s), mount_options());
      return fs_->build_index();
    });
  }

  // Runs one Fs call that changes the store, after which the tree is `after`.
  // Synchronous: durable when it returns, so a crash shows the tree before
  // or after it. Each runs on a thread of its own, so changes land in
  // different logs. Asynchronous: durable at the next sync, so a crash may
  // show the tree after any of the changes since the last sync (or none).
  // They run on one thread, hence one log, whose recovery keeps a prefix.
  Status change(CommitLog& log, Tree after, const std::string& what,
                const std::function<int()>& op) {
    if (async_) {
      unsynced_.push_back(digest_of(after));
      log.expect(allowed());
      PM_TRY(errno_status(op(), what));
    } else {
      PM_TRY(log.durable(digest_of(after),
                         [&] { return on_new_thread([&] { return errno_status(op(), what); }); }));
    }
    model_ = std::move(after);
    return Status();
  }

  // Gleaning, epochs and checkpoints change nothing a mount shows.
  Status background(CommitLog& log, const std::function<Status()>& op) {
    return async_ ? op() : log.durable(digest_of(model_), op);
  }

  // The tree durable at the last sync, then after each change since.
  std::vector<uint64_t> allowed() const {
    std::vector<uint64_t> a{durable_};
    a.insert(a.end(), unsynced_.begin(), unsynced_.end());
    return a;
  }

  // What fsync and sync(2) call: every change so far becomes durable.
  Status sync(CommitLog& log) {
    PM_TRY(errno_status(fs_->do_sync(), "sync"));
    durable_ = digest_of(model_);
    unsynced_.clear();
    log.expect({durable_});
    return Status();
  }

  // The inode at `path` ("" the root), 0 when missing.
  Ino ino_of(const std::string& path) {
    Ino ino = pmfs::kRootIno;
    size_t start = 0;
    while (start < path.size()) {
      const size_t slash = std::min(path.find('/', start), path.size());
      fuse_entry_param e;
      if (fs_->do_lookup(ino, path.substr(start, slash - start).c_str(), &e) != 0) return 0;
      ino = e.ino;
      if (ino == 0) return 0;
      start = slash + 1;
    }
    return ino;
  }

  std::string random_dir(std::mt19937_64& rng) const {
    std::vector<std::string> dirs = {""};
    for (const auto& [p, e] : model_) {
      if (e.type == 'D') dirs.push_back(p);
    }
    return dirs[rng() % dirs.size()];
  }
  // A random entry's path; empty when there are none.
  std::string random_entry(std::mt19937_64& rng) const {
    if (model_.empty()) return "";
    auto it = model_.begin();
    std::advance(it, static_cast<long>(rng() % model_.size()));
    return it->first;
  }

  Status write_file(std::mt19937_64& rng, CommitLog& log) {
    const std::string path = join(random_dir(rng), fmt::format("f{}", rng() % 4));
    auto it = model_.find(path);
    if (it != model_.end() && it->second.type != 'F') return Status();
    // One in four is larger than a value: two or three chunks under a manifest.
    const size_t size = rng() % 4 == 0 ? kValue + 1 + rng() % (2 * kValue) : 1 + rng() % 300;
    const std::string data = random_bytes(rng, size);
    if (it == model_.end()) {  // create: an empty file, one transaction
      Tree after = model_;
      after[path] = Entry{'F', 0644, "", 1, next_group_++};
      const Ino parent = ino_of(parent_of(path));
      fuse_entry_param e;
      PM_TRY(change(log, after, "create " + path, [&] {
        return fs_->do_make(parent, name_of(path).c_str(), S_IFREG | 0644, 0, "", {0, 0}, &e);
      }));
    }
    // Open (with O_TRUNC when rewriting), write, close: the data is one
    // more transaction, at flush. One rewrite in three meets the release
    // of a descriptor closed before its open (the kernel sends releases
    // late): it changes nothing durable.
    pmfs::Handle* h = nullptr;
    pmfs::Handle* late = nullptr;
    bool ignored = false;  // (root: no set-ID bits cleared)
    if (it != model_.end() && rng() % 3 == 0) {
      PM_TRY(errno_status(fs_->do_open(ino_of(path), O_RDWR, kRoot, &late, &ignored),
                          "open " + path));
      PM_TRY(errno_status(fs_->do_flush(late), "close " + path));
    }
    PM_TRY(errno_status(fs_->do_open(ino_of(path), O_WRONLY | O_TRUNC, kRoot, &h, &ignored),
                        "open " + path));
    if (late != nullptr) {
      PM_TRY(background(log, [&] {
        fs_->do_release(late);
        return Status();
      }));
    }
    const int werr = fs_->do_write(h, data.data(), data.size(), 0, kRoot, &ignored);
    Tree after = model_;
    for_names(&after, path, [&](Entry* x) { x->data = data; });
    Status s = werr != 0 ? errno_status(werr, "write " + path)
                         : change(log, after, "flush " + path, [&] { return fs_->do_flush(h); });
    fs_->do_release(h);
    return s;
  }

  // A write into an existing file without O_TRUNC, across chunks when it
  // is chunked (a chunk changed in place would show half of it after a
  // crash), possibly extending it; or, one time in four, a hole punched
  // into it (fallocate: whole chunks become holes, partial ones zeros).
  Status overwrite(std::mt19937_64& rng, CommitLog& log) {
    const std::string path = random_entry(rng);
    if (path.empty() || model_.at(path).type != 'F') return Status();
    const std::string& old = model_.at(path).data;
    const size_t off = rng() % (old.size() + 1);
    const bool punch = rng() % 4 == 0;
    const std::string data = random_bytes(rng, 1 + rng() % (kValue + kValue / 2));
    std::string d = old;
    if (punch) {
      std::fill(d.begin() + off, d.begin() + std::min(d.size(), off + data.size()), '\0');
    } else {
      if (d.size() < off + data.size()) d.resize(off + data.size());
      d.replace(off, data.size(), data);
    }
    Tree after = model_;
    for_names(&after, path, [&](Entry* x) { x->data = d; });
    pmfs::Handle* h = nullptr;
    bool ignored = false;
    PM_TRY(errno_status(fs_->do_open(ino_of(path), O_WRONLY, kRoot, &h, &ignored), "open " + path));
    const auto o = static_cast<off_t>(off);
    const int werr =
        punch ? fs_->do_fallocate(h, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, o,
                                  static_cast<off_t>(data.size()), kRoot, &ignored)
              : fs_->do_write(h, data.data(), data.size(), o, kRoot, &ignored);
    Status s = werr != 0 ? errno_status(werr, (punch ? "punch " : "write ") + path)
                         : change(log, after, "flush " + path, [&] { return fs_->do_flush(h); });
    fs_->do_release(h);
    return s;
  }

  static std::string random_bytes(std::mt19937_64& rng, size_t n) {
    std::string s(n, '\0');
    for (char& c : s) c = static_cast<char>('a' + rng() % 26);
    return s;
  }

  Status make_dir(std::mt19937_64& rng, CommitLog& log) {
    const std::string dir = random_dir(rng);
    const std::string path = join(dir, fmt::format("d{}", rng() % 3));
    if (model_.contains(path) || std::count(dir.begin(), dir.end(), '/') > 1) return Status();
    Tree after = model_;
    after[path] = Entry{'D', 0755, ""};
    const Ino parent = ino_of(dir);
    fuse_entry_param e;
    return change(log, after, "mkdir " + path, [&] {
      return fs_->do_make(parent, name_of(path).c_str(), S_IFDIR | 0755, 0, "", {0, 0}, &e);
    });
  }

  Status remove(std::mt19937_64& rng, CommitLog& log) {
    const std::string path = random_entry(rng);
    if (path.empty()) return Status();
    const bool dir = model_.at(path).type == 'D';
    const Ino parent = ino_of(parent_of(path));
    if (dir && has_children(model_, path)) {  // refused, nothing changes
      const int err = fs_->do_remove(parent, name_of(path).c_str(), true);
      return err == ENOTEMPTY ? Status() : errno_status(err ? err : EINVAL, "rmdir " + path);
    }
    Tree after = model_;
    if (!dir) for_names(&after, path, [](Entry* x) { x->nlink--; });
    after.erase(path);
    return change(log, after, "remove " + path,
                  [&] { return fs_->do_remove(parent, name_of(path).c_str(), dir); });
  }

  // A file, symlink or whole directory to a random directory, replacing a
  // target of the same kind (an empty one, for directories).
  Status rename(std::mt19937_64& rng, CommitLog& log) {
    const std::string src = random_entry(rng);
    if (src.empty()) return Status();
    const Entry& e = model_.at(src);
    const std::string dir = random_dir(rng);
    const std::string dst = join(dir, fmt::format("{}{}", e.type == 'D' ? 'd' : 'f', rng() % 4));
    if (dst == src || dir == src || is_below(dir, src)) return Status();
    auto target = model_.find(dst);
    if (target != model_.end()) {
      const bool both_dirs = e.type == 'D' && target->second.type == 'D';
      const bool both_files = e.type != 'D' && target->second.type != 'D';
      if (!(both_files || (both_dirs && !has_children(model_, dst)))) return Status();
    }
    // Two names of one file: POSIX says nothing happens. Else a replaced
    // file loses a name.
    const bool same_file =
        target != model_.end() && e.type != 'D' && target->second.group == e.group;
    Tree before = model_;
    if (target != model_.end() && target->second.type != 'D' && !same_file) {
      for_names(&before, dst, [](Entry* x) { x->nlink--; });
    }
    Tree after;
    if (same_file) {
      after = model_;
    } else {
      for (const auto& [p, x] : before) {
        if (p == dst) continue;  // replaced
        if (p == src) {
          after[dst] = x;
        } else if (is_below(p, src)) {
          after[dst + p.substr(src.size())] = x;
        } else {
          after[p] = x;
        }
      }
    }
    const Ino from = ino_of(parent_of(src)), to = ino_of(dir);
    return change(log, after, fmt::format("rename {} {}", src, dst), [&] {
      return fs_->do_rename(from, name_of(src).c_str(), to, name_of(dst).c_str(), 0);
    });
  }

  Status symlink(std::mt19937_64& rng, CommitLog& log) {
    const std::string path = join(random_dir(rng), fmt::format("f{}", rng() % 4));
    if (model_.contains(path)) return Status();
    const std::string target = fmt::format("../target/{}", std::string(rng() % 100, 'x'));
    Tree after = model_;
    after[path] = Entry{'L', 0777, target, 1, next_group_++};
    const Ino parent = ino_of(parent_of(path));
    fuse_entry_param e;
    return change(log, after, "symlink " + path, [&] {
      return fs_->do_make(parent, name_of(path).c_str(), S_IFLNK | 0777, 0, target, {0, 0}, &e);
    });
  }

  Status chmod(std::mt19937_64& rng, CommitLog& log) {
    const std::string path = random_entry(rng);
    if (path.empty() || model_.at(path).type == 'L') return Status();
    const auto perm = static_cast<uint32_t>(rng() % 01000);
    Tree after = model_;
    for_names(&after, path, [&](Entry* x) { x->perm = perm; });
    struct stat attr {
    }, out;
    attr.st_mode = perm;
    const Ino ino = ino_of(path);
    return change(log, after, "chmod " + path,
                  [&] { return fs_->do_setattr(ino, attr, FUSE_SET_ATTR_MODE, nullptr, kRoot, &out); });
  }

  Status truncate(std::mt19937_64& rng, CommitLog& log) {
    const std::string path = random_entry(rng);
    if (path.empty() || model_.at(path).type != 'F') return Status();
    const uint64_t size = rng() % 2 == 0 ? rng() % 400 : rng() % (3 * kValue);
    Tree after = model_;
    for_names(&after, path, [&](Entry* x) { x->data.resize(size); });
    struct stat attr {
    }, out;
    attr.st_size = static_cast<off_t>(size);
    const Ino ino = ino_of(path);
    return change(log, after, "truncate " + path,
                  [&] { return fs_->do_setattr(ino, attr, FUSE_SET_ATTR_SIZE, nullptr, kRoot, &out); });
  }

  // A new name for a random file (a hard link): its first moves the file to
  // an inode key, all in the transaction that adds the name.
  Status link(std::mt19937_64& rng, CommitLog& log) {
    const std::string src = random_entry(rng);
    if (src.empty() || model_.at(src).type != 'F') return Status();
    const std::string dir = random_dir(rng);
    const std::string dst = join(dir, fmt::format("f{}", rng() % 4));
    if (model_.contains(dst)) return Status();
    Tree after = model_;
    for_names(&after, src, [](Entry* x) { x->nlink++; });
    after[dst] = after.at(src);
    const Ino ino = ino_of(src), to = ino_of(dir);
    fuse_entry_param e;
    return change(log, after, fmt::format("link {} {}", src, dst),
                  [&] { return fs_->do_link(ino, to, name_of(dst).c_str(), &e); });
  }

  // Sets or removes an extended attribute of a random file or directory
  // (a file's are its inode's, seen through all its names).
  Status xattr(std::mt19937_64& rng, CommitLog& log) {
    const std::string path = random_entry(rng);
    if (path.empty() || model_.at(path).type == 'L') return Status();
    const std::string name = fmt::format("user.k{}", rng() % 3);
    const bool set = !model_.at(path).xattrs.contains(name) || rng() % 3 != 0;
    const std::string value = random_bytes(rng, rng() % 200);
    Tree after = model_;
    for_names(&after, path, [&](Entry* x) {
      if (set) {
        x->xattrs[name] = value;
      } else {
        x->xattrs.erase(name);
      }
    });
    const Ino ino = ino_of(path);
    return change(log, after, fmt::format("{}xattr {} {}", set ? "set" : "remove", path, name),
                  [&] {
                    return set ? fs_->do_setxattr(ino, name.c_str(), value, 0)
                               : fs_->do_removexattr(ino, name.c_str());
                  });
  }

  // Applies f to every name of the file at path in t (to a directory: to it).
  static void for_names(Tree* t, const std::string& path, const std::function<void(Entry*)>& f) {
    Entry& e = t->at(path);
    if (e.type == 'D') return f(&e);
    const uint64_t group = e.group;
    for (auto& [p, x] : *t) {
      if (x.type != 'D' && x.group == group) f(&x);
    }
  }

  static constexpr size_t kMaxUnsynced = 8;
  const bool async_;
  kv::StoreOptions options_;
  uint64_t durable_ = 0;           // async: the tree's digest at the last sync
  std::vector<uint64_t> unsynced_;  // async: digests after each change since
  Container* live_ = nullptr;
  uint64_t live_generation_ = 0;
  kv::Store* store_ = nullptr;  // owned by fs_
  std::unique_ptr<pmfs::Fs> fs_;
  Tree model_;
  uint64_t next_group_ = uint64_t{1} << 40;  // above the inode numbers a walk reports
};

}  // namespace

std::unique_ptr<Workload> make_fuse_workload() { return std::make_unique<FuseWorkload>(false); }
std::unique_ptr<Workload> make_fuse_async_workload() {
  return std::make_unique<FuseWorkload>(true);
}

}  // namespace pm::crash
