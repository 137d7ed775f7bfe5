#include "db_image.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "planted_bugs.h"

namespace pmsqlite {

SqlitePlantedBugs g_sqlite_planted_bugs;

using pm::Result;
using pm::Status;

namespace {

Status damaged(const pm::Container& c, const std::string& what) {
  return Status::corruption(c.info().path + ": the SQLite image in this container is damaged (" +
                            what + ")");
}

uint64_t chunks_for(uint64_t bytes) { return (bytes + kChunkBytes - 1) >> kChunkShift; }

// A chunk pointer read from the file must be a page-aligned address in the
// heap, or we would hand SQLite wild memory.
bool plausible_chunk(const pm::Container& c, const std::byte* p) {
  return p == nullptr ||
         (c.contains(p) && c.contains(p + kChunkBytes - 1) && reinterpret_cast<uintptr_t>(p) % 4096 == 0);
}

Status check_root(const pm::Container& c, const ImageRoot& r) {
  if (r.magic != kImageMagic) return damaged(c, "bad magic");
  if (r.version != 1) return damaged(c, "format version " + std::to_string(r.version));
  if (r.chunk_shift != kChunkShift) return damaged(c, "chunk size");
  if (r.capacity > 0 && !c.contains(r.chunks)) return damaged(c, "chunk table outside the heap");
  Result<pm::BlockInfo> table = c.find_block(r.chunks);
  if (r.capacity > 0 && (!table.ok() || table->size / sizeof(void*) < r.capacity)) {
    return damaged(c, "chunk table smaller than its capacity");
  }
  if (chunks_for(r.size) > r.capacity) return damaged(c, "size beyond the chunk table");
  for (uint64_t i = 0; i < r.capacity; i++) {
    if (!plausible_chunk(c, r.chunks[i])) return damaged(c, "chunk " + std::to_string(i));
  }
  return Status();
}

}  // namespace

Result<DbImage> DbImage::attach(pm::Container& c) {
  auto* root = static_cast<ImageRoot*>(c.root(kRootName));
  if (root != nullptr) {
    Result<pm::BlockInfo> b = c.find_block(root);
    if (!b.ok() || b->start != root || b->size < sizeof(ImageRoot)) {
      return damaged(c, "root is not a block");
    }
    PM_TRY(check_root(c, *root));
    return DbImage(c, root);
  }
  pm::MutationGuard guard(c);
  Result<void*> mem = c.alloc(sizeof(ImageRoot));
  if (!mem.ok()) return mem.status();
  c.will_write(*mem, sizeof(ImageRoot));
  root = new (*mem) ImageRoot{kImageMagic, 1, kChunkShift, 0, 0, nullptr};
  PM_TRY(c.set_root(root, kRootName));
  return DbImage(c, root);
}

size_t DbImage::read(void* buf, size_t n, uint64_t off) const {
  auto* out = static_cast<std::byte*>(buf);
  const uint64_t end = root_->size;
  const size_t inside = off >= end ? 0 : static_cast<size_t>(std::min<uint64_t>(n, end - off));
  size_t done = 0;
  while (done < inside) {
    const uint64_t pos = off + done;
    const uint64_t in_chunk = pos & (kChunkBytes - 1);
    const size_t len = static_cast<size_t>(std::min<uint64_t>(inside - done, kChunkBytes - in_chunk));
    const std::byte* chunk = root_->chunks[pos >> kChunkShift];
    if (chunk == nullptr) {
      std::memset(out + done, 0, len);
    } else {
      std::memcpy(out + done, chunk + in_chunk, len);
    }
    done += len;
  }
  std::memset(out + inside, 0, n - inside);
  return inside;
}

// The root and the chunk table as committed: this transaction may have
// moved the table and freed or added chunks since.
Status DbImage::read_committed(void* buf, size_t n, uint64_t off) const {
  ImageRoot r;
  PM_TRY(c_->read_committed(root_, &r, sizeof r));
  const uint64_t index = off >> kChunkShift;
  if (r.magic != kImageMagic || n == 0 || off >= r.size || n > r.size - off ||
      index != (off + n - 1) >> kChunkShift || index >= r.capacity) {
    return Status::not_found("the last commit holds no such range");
  }
  std::byte* chunk = nullptr;
  const auto slot = reinterpret_cast<uintptr_t>(r.chunks) + index * sizeof(chunk);
  PM_TRY(c_->read_committed(reinterpret_cast<const void*>(slot), &chunk, sizeof chunk));
  if (chunk == nullptr) {
    std::memset(buf, 0, n);  // a missing chunk reads as zeros
    return Status();
  }
  return c_->read_committed(chunk + (off & (kChunkBytes - 1)), buf, n);
}

Status DbImage::reserve_table(uint64_t chunks) {
  if (chunks <= root_->capacity) return Status();
  const uint64_t capacity = std::max<uint64_t>({chunks, root_->capacity * 2, 8});
  Result<void*> mem = c_->alloc(capacity * sizeof(void*));
  if (!mem.ok()) return mem.status();
  auto* table = static_cast<std::byte**>(*mem);
  c_->will_write(table, capacity * sizeof(void*));
  std::copy_n(root_->chunks, root_->capacity, table);
  std::fill(table + root_->capacity, table + capacity, nullptr);
  std::byte** old = root_->chunks;
  c_->will_write(&root_->capacity, sizeof(uint64_t) + sizeof(void*));
  root_->chunks = table;
  root_->capacity = capacity;
  return c_->free(old);
}

Result<std::byte*> DbImage::chunk_for_write(uint64_t index) {
  PM_TRY(reserve_table(index + 1));
  std::byte*& slot = root_->chunks[index];
  if (slot != nullptr) return slot;
  Result<void*> mem = c_->alloc(kChunkBytes, pm::AllocKind::kData);
  if (!mem.ok()) return mem.status();
  // A new chunk is zeroed whole: the parts SQLite does not write now must
  // read as zeros, in this session and after a restart.
  c_->will_write(*mem, kChunkBytes);
  std::memset(*mem, 0, kChunkBytes);
  c_->will_write(&slot, sizeof(slot));
  slot = static_cast<std::byte*>(*mem);
  return slot;
}

void DbImage::set_size(uint64_t size) {
  if (!g_sqlite_planted_bugs.unannounced_size) c_->will_write(&root_->size, sizeof(root_->size));
  root_->size = size;
}

// SQLite writes whole pages, of which a one-row transaction changes a few
// cache lines (the page header, a cell pointer, the cell). Only the lines
// that differ are stored and announced, so the commit compares and
// journals those alone: its compare of every announced line against the
// file was an eighth of a one-row transaction's CPU. A line left out holds
// these bytes already, announced or not: either way the commit takes it
// as it is.
void DbImage::store_changed_lines(std::byte* to, const std::byte* from, size_t n) {
  constexpr size_t kLine = 64;
  size_t run = 0, run_len = 0;  // changed lines not yet stored
  auto store = [&] {
    if (run_len == 0) return;
    c_->will_write(to + run, run_len);
    std::memcpy(to + run, from + run, run_len);
    run_len = 0;
  };
  for (size_t at = 0; at < n;) {
    const size_t len =
        std::min(n - at, kLine - (reinterpret_cast<uintptr_t>(to + at) & (kLine - 1)));
    if (std::memcmp(to + at, from + at, len) != 0) {
      if (run_len == 0) run = at;
      run_len += len;
    } else {
      store();
    }
    at += len;
  }
  store();
}

Status DbImage::write(const void* buf, size_t n, uint64_t off) {
  if (n == 0) return Status();
  pm::MutationGuard guard(*c_);
  const auto* in = static_cast<const std::byte*>(buf);
  size_t done = 0;
  while (done < n) {
    const uint64_t pos = off + done;
    const uint64_t in_chunk = pos & (kChunkBytes - 1);
    const size_t len = static_cast<size_t>(std::min<uint64_t>(n - done, kChunkBytes - in_chunk));
    Result<std::byte*> chunk = chunk_for_write(pos >> kChunkShift);
    if (!chunk.ok()) return chunk.status();
    store_changed_lines(*chunk + in_chunk, in + done, len);
    done += len;
  }
  if (off + n > root_->size) set_size(off + n);
  return Status();
}

Status DbImage::truncate(uint64_t size, bool free_chunks) {
  if (size >= root_->size) {
    if (size > root_->size) set_size(size);  // the gap reads as zeros
    return Status();
  }
  pm::MutationGuard guard(*c_);
  const uint64_t keep = chunks_for(size);
  const uint64_t used = chunks_for(root_->size);
  if (std::byte* last = keep > 0 ? root_->chunks[keep - 1] : nullptr; last != nullptr) {
    const uint64_t tail = size & (kChunkBytes - 1);
    if (tail != 0) {
      c_->will_write(last + tail, kChunkBytes - tail);
      std::memset(last + tail, 0, kChunkBytes - tail);
    }
  }
  for (uint64_t i = keep; i < used; i++) {
    std::byte*& slot = root_->chunks[i];
    if (slot == nullptr) continue;
    if (free_chunks) {
      PM_TRY(c_->free(slot));
      c_->will_write(&slot, sizeof(slot));
      slot = nullptr;
    } else {
      c_->will_write(slot, kChunkBytes);
      std::memset(slot, 0, kChunkBytes);
    }
  }
  set_size(size);
  return Status();
}

void* DbImage::fetch(uint64_t off, size_t n) const {
  if (n == 0 || off + n > root_->size) return nullptr;
  if ((off >> kChunkShift) != ((off + n - 1) >> kChunkShift)) return nullptr;
  std::byte* chunk = root_->chunks[off >> kChunkShift];
  return chunk == nullptr ? nullptr : chunk + (off & (kChunkBytes - 1));
}

}  // namespace pmsqlite
