// Fs: open files (open, read, write, fallocate, flush, fsync, release),
// whose descriptors share one FileData (docs/fuse.md, "Files").
#include <fcntl.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "fuse/errno_map.h"
#include "fuse/fs.h"
#include "fuse/fs_internal.h"
#include "fuse/planted_bugs.h"

namespace pmfs {

// ---------------------------------------------------------------- file data

int Fs::do_open(Ino ino, int flags, const Caller& c, Handle** out, bool* mode_changed) {
  auto h = std::make_unique<Handle>();
  h->ino = ino;
  h->flags = flags;
  {
    std::unique_lock lock(mu_);
    Node* n = table_.get(ino);
    if (n == nullptr) return ENOENT;
    if (n->is_dir()) return EISDIR;
    if (n->data == nullptr) {
      n->data = new_file_data();
    }
    h->data = n->data;
    n->open_count++;  // keeps the node and its data until release
  }
  {
    std::lock_guard dl(h->data->mu);
    h->put_errors_seen = h->data->put_errors;  // failures before the open are not its own
  }
  // atomic_o_trunc: the kernel leaves O_TRUNC to us, read-only opens
  // included (Linux truncates those too). A reader's handle puts nothing
  // at flush: its open truncates at once, as truncate(2) does.
  if ((flags & O_TRUNC) && !writable(flags)) {
    struct stat attr {}, st;
    attr.st_size = 0;
    if (int err = do_setattr(ino, attr, FUSE_SET_ATTR_SIZE, nullptr, c, &st)) {
      do_release(h.release());
      return err;
    }
    *mode_changed = true;  // a set-user-ID bit may be gone
  } else if (flags & O_TRUNC) {  // the put at flush truncates
    int err = 0;
    {
      std::lock_guard dl(h->data->mu);
      std::unique_lock lock(mu_);
      Node* n = table_.get(ino);
      // Loaded first: a chunked file's manifest says which chunks the put
      // at flush drops.
      err = load(h->data.get(), *n);
      if (err == 0) err = h->data->content.truncate(0);
      if (err == 0) h->changed_in = h->data->generation;
      if (err == 0) {
        n->size = n->hole_bytes = 0;
        n->meta.mtime_ns = n->meta.ctime_ns = now_ns();
        *mode_changed = kill_suid(&n->meta, c);  // stored with the truncated content at flush
      }
    }
    if (err != 0) {
      do_release(h.release());
      return err;
    }
  }
  {
    std::lock_guard g(handles_mu_);
    handles_.insert(h.get());
  }
  *out = h.release();
  return 0;
}

// REQUIRES: h->data->mu.
int Fs::load_shared(Handle* h) {
  if (h->data->content.loaded()) return 0;
  std::shared_lock lock(mu_);
  Node* n = table_.get(h->ino);
  return n == nullptr ? EBADF : load(h->data.get(), *n);
}

int Fs::do_read(Handle* h, size_t size, off_t off, std::string* out) {
  std::lock_guard dl(h->data->mu);
  if (int err = load_shared(h)) return err;
  return h->data->content.read(static_cast<uint64_t>(off), size, out);
}

int Fs::do_lseek(Handle* h, off_t off, int whence, off_t* out) {
  if (whence != SEEK_DATA && whence != SEEK_HOLE) return EINVAL;
  if (off < 0) return ENXIO;
  std::lock_guard dl(h->data->mu);
  if (int err = load_shared(h)) return err;
  uint64_t at = 0;
  const int err = h->data->content.seek(static_cast<uint64_t>(off), whence == SEEK_DATA, &at);
  if (err == 0) *out = static_cast<off_t>(at);
  return err;
}

int Fs::do_write(Handle* h, const char* data, size_t size, off_t off, const Caller& c,
                 bool* mode_changed, bool page_cache) {
  FileData* d = h->data.get();
  std::lock_guard dl(d->mu);
  std::unique_lock lock(mu_);
  Node* n = table_.get(h->ino);
  if (n == nullptr) return EBADF;
  if (int err = load(d, *n)) return err;
  // (The kernel's write-back of mapped pages goes through any descriptor
  // with a shared writable mapping, an O_APPEND one too: at its offset.)
  const uint64_t o =
      (h->flags & O_APPEND) && !page_cache ? d->content.size() : static_cast<uint64_t>(off);
  // The holes it fills or makes: in the chunks from the old end or the
  // write, whichever is first, to the write's end (all of them when the
  // file stops being one value).
  const uint64_t from = std::min(o, d->content.size()), to = o + size;
  const bool was_inline = d->content.size() <= layout_.inline_max;
  const uint64_t before = d->content.hole_bytes(from, to);
  const int err = d->content.write(o, std::string_view(data, size));
  (page_cache ? d->mapped_in : h->changed_in) = d->generation;
  n->size = d->content.size();  // a failed write may have extended the file
  n->hole_bytes = was_inline ? d->content.hole_bytes()
                             : n->hole_bytes - std::min(n->hole_bytes, before) +
                                   d->content.hole_bytes(from, to);
  if (err != 0) return err;
  n->meta.mtime_ns = n->meta.ctime_ns = now_ns();
  *mode_changed = kill_suid(&n->meta, c);  // stored with the content at flush
  return 0;
}

int Fs::do_fallocate(Handle* h, int mode, off_t off, off_t len, const Caller& c,
                     bool* mode_changed) {
  const bool keep_size = mode & FALLOC_FL_KEEP_SIZE;
  const int kind = mode & ~FALLOC_FL_KEEP_SIZE;
  if (kind != 0 && kind != FALLOC_FL_PUNCH_HOLE && kind != FALLOC_FL_ZERO_RANGE) return EOPNOTSUPP;
  if (off < 0 || len <= 0) return EINVAL;
  const auto begin = static_cast<uint64_t>(off), end = begin + static_cast<uint64_t>(len);
  if (end < begin || end > layout_.max_file) return EFBIG;  // as vfs_fallocate, in every mode
  // The store cannot set space aside (a later write may still find it full:
  // docs/fuse.md), but a request for more than it has left fails at once,
  // as on a full disk. Holes and zeros take no space.
  const uint64_t free = kind == 0 ? space().free : 0;
  FileData* d = h->data.get();
  std::lock_guard dl(d->mu);
  std::unique_lock lock(mu_);
  Node* n = table_.get(h->ino);
  if (n == nullptr) return EBADF;
  if (int err = load(d, *n)) return err;
  const uint64_t size = d->content.size();
  if (kind == 0 && end > size && end - std::max(begin, size) > free) return ENOSPC;
  const bool grows = !keep_size && kind != FALLOC_FL_PUNCH_HOLE && end > size;
  // As on ext4, a range wholly past the end changes nothing but the size.
  const bool zeros = kind != 0 && begin < size;
  if (grows) {
    const int err = d->content.truncate(end);
    n->size = d->content.size();
    if (err != 0) return err;
  }
  if (zeros) {
    if (int err = d->content.zero(begin, end - begin)) return err;
  }
  n->hole_bytes = d->content.hole_bytes();
  if (!grows && !(zeros && d->content.modified())) return 0;  // nothing to store
  h->changed_in = d->generation;
  n->meta.mtime_ns = n->meta.ctime_ns = now_ns();
  *mode_changed = kill_suid(&n->meta, c);  // stored with the content at flush
  return 0;
}

int Fs::do_flush(Handle* h) {
  h->closed.store(true, std::memory_order_relaxed);
  return store_staged(h);
}

int Fs::store_staged(Handle* h, bool any) {
  // A reader's close reports no writer's failure; its fsync stores what the
  // writers staged, as fsync(2) through any descriptor makes a file durable.
  if (!writable(h->flags) && !any) return 0;
  FileData* d = h->data.get();
  std::unique_lock dl(d->mu);
  // A put of the shared content that failed since this descriptor last
  // flushed (through another one, or a truncate by name) dropped its
  // writes too: it is told, once, even when nothing is staged now.
  const int dropped = h->put_errors_seen != d->put_errors ? d->last_put_error : 0;
  h->put_errors_seen = d->put_errors;
  if (!d->content.modified()) return dropped;
  if (!any && h->changed_in != d->generation && d->mapped_in != d->generation &&
      !g_fuse_planted_bugs.release_stores_others) {
    return dropped;
  }
  std::unique_lock lock(mu_);
  Node* n = table_.get(h->ino);
  if (n == nullptr || n->parent == 0) return dropped;  // unlinked: nowhere to put it
  Batch b(store_.get());
  if (int err = put_content(d, n, n->meta, &b)) {  // every descriptor shows the store again
    h->put_errors_seen = d->put_errors;  // told now
    n->size = n->committed_size;
    n->hole_bytes = 0;  // unknown until the content is read again: counted as data
    lock.unlock();
    dl.unlock();  // the kernel may write dirty mapped pages back first: a FUSE_WRITE
    invalidate_content(h->ino);
    return err;
  }
  n->committed_size = n->size = d->content.size();
  n->has_record = true;
  return dropped;
}

int Fs::do_fsync(Handle* h) {
  const int err = store_staged(h, /*any=*/true);  // may report a failure that dropped its writes
  const int synced = do_sync();  // what is stored is durable all the same
  return err != 0 ? err : synced;
}

int Fs::do_sync() { return to_errno(sync_and_collect()); }

void Fs::do_release(Handle* h, bool store) {
  if (!store) {
    std::lock_guard dl(h->data->mu);
    if (writable(h->flags) && h->data->content.modified()) {
      fuse_log(FUSE_LOG_WARNING,
               "pmfs: inode %llu: still open for writing when the mount stopped, never "
               "closed or fsynced since its last write: that write is dropped\n",
               static_cast<unsigned long long>(h->ino));
    }
  } else if (int err = store_staged(h)) {
    fuse_log(FUSE_LOG_WARNING, "pmfs: inode %llu: write at release failed: %s\n",
             static_cast<unsigned long long>(h->ino), std::strerror(err));
  }
  std::vector<uint64_t> staged, retired;
  {
    std::lock_guard dl(h->data->mu);
    std::unique_lock lock(mu_);
    Node* n = table_.get(h->ino);
    if (n != nullptr && --n->open_count == 0) {
      // Named by no committed manifest: what an unflushed writer staged.
      staged = n->data->content.abandon();
      retired.swap(n->retired_chunks);
      std::string().swap(n->unlinked_value);
      std::string().swap(n->unlinked_xattrs);
      n->data.reset();
      table_.erase_if_unused(n);
    }
  }
  remove_chunks(staged);
  discard_chunks(std::move(retired));
  {
    std::lock_guard g(handles_mu_);
    handles_.erase(h);
  }
  delete h;
}

}  // namespace pmfs
