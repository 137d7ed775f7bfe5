#include "fuse/file_content.h"

#include <fuse_log.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "fuse/errno_map.h"
#include "fuse/key_names.h"
#include "fuse/planted_bugs.h"

namespace pmfs {

std::string chunk_key(uint64_t id) { return id_key(kChunkPrefix, id); }

std::optional<uint64_t> chunk_id(std::string_view key) { return key_id(kChunkPrefix, key); }

std::string encode_manifest(const Manifest& m) {
  std::string r(kManifestHeaderBytes + 8 * m.ids.size(), '\0');
  r[0] = 1;
  put_le(&r, 4, m.chunk_bytes);
  put_le(&r, 8, m.size);
  for (size_t i = 0; i < m.ids.size(); i++) put_le(&r, kManifestHeaderBytes + 8 * i, m.ids[i]);
  return r;
}

uint64_t hole_bytes(uint32_t chunk_bytes, uint64_t size, const std::vector<uint64_t>& ids) {
  uint64_t holes = 0;
  for (size_t i = 0; i < ids.size(); i++) {
    const uint64_t start = i * uint64_t{chunk_bytes};
    if (ids[i] == 0 && start < size) holes += std::min<uint64_t>(chunk_bytes, size - start);
  }
  return holes;
}

std::optional<Manifest> decode_manifest(std::string_view v) {
  if (v.size() < kManifestHeaderBytes || v[0] != 1) return std::nullopt;
  Manifest m;
  m.chunk_bytes = get_le<uint32_t>(v, 4);
  m.size = get_le<uint64_t>(v, 8);
  if (m.chunk_bytes == 0) return std::nullopt;
  const uint64_t n = m.size / m.chunk_bytes + (m.size % m.chunk_bytes != 0);
  if ((v.size() - kManifestHeaderBytes) / 8 != n || (v.size() - kManifestHeaderBytes) % 8 != 0) {
    return std::nullopt;
  }
  m.ids.resize(n);
  for (uint64_t i = 0; i < n; i++) m.ids[i] = get_le<uint64_t>(v, kManifestHeaderBytes + 8 * i);
  return m;
}

// ---------------------------------------------------------------- FileContent

uint64_t FileContent::chunks_for(uint64_t size) const {
  return size / chunk_bytes_ + (size % chunk_bytes_ != 0);
}

void FileContent::load(std::string_view value, bool chunked, std::string_view key) {
  modified_ = false;
  size_ = 0;
  chunk_bytes_ = layout_->chunk_bytes;
  ids_.clear();
  dirty_.clear();
  committed_ids_.clear();
  staged_.clear();
  cached_id_ = 0;
  std::optional<Manifest> m = chunked ? decode_manifest(value) : std::nullopt;
  if (chunked && !m) {
    fuse_log(FUSE_LOG_ERR, "pmfs: %.*s: damaged chunk manifest (%zu bytes): read as content\n",
             static_cast<int>(key.size()), key.data(), value.size());
  }
  if (m) {
    chunk_bytes_ = m->chunk_bytes;
    size_ = m->size;
    ids_ = m->ids;
    committed_ids_ = std::move(m->ids);
  } else {
    // A value may be larger than a chunk (inline_max > chunk_bytes): it is
    // held as the chunks it would be, all to be written if it is chunked.
    size_ = value.size();
    hold_inline(value);
  }
  loaded_ = true;
}

int FileContent::chunk(uint64_t i, std::string_view* out) {
  if (auto d = dirty_.find(i); d != dirty_.end()) {
    *out = d->second;
    return 0;
  }
  const uint64_t id = ids_[i];
  if (id == 0) {
    *out = {};
    return 0;
  }
  if (cached_id_ != id) {
    cached_id_ = 0;
    pm::Status s = store_->get(chunk_key(id), &cached_);
    if (s.is_not_found()) {  // a damaged store: say so rather than invent bytes
      fuse_log(FUSE_LOG_ERR, "pmfs: chunk %llu of an open file is missing from the store\n",
               static_cast<unsigned long long>(id));
      return EIO;
    }
    if (!s.ok()) return to_errno(s);
    cached_id_ = id;
  }
  *out = cached_;
  return 0;
}

int FileContent::read(uint64_t off, size_t len, std::string* out) {
  out->clear();
  if (off >= size_) return 0;
  len = static_cast<size_t>(std::min<uint64_t>(len, size_ - off));
  out->resize(len);
  for (size_t done = 0; done < len;) {
    const uint64_t pos = off + done;
    const uint64_t i = pos / chunk_bytes_, in = pos % chunk_bytes_;
    const size_t n = static_cast<size_t>(std::min<uint64_t>(len - done, chunk_bytes_ - in));
    std::string_view c;
    if (int err = chunk(i, &c)) return err;
    const size_t have = in < c.size() ? std::min(n, static_cast<size_t>(c.size() - in)) : 0;
    if (have != 0) std::memcpy(out->data() + done, c.data() + in, have);  // a hole has no data()
    std::memset(out->data() + done + have, 0, n - have);  // past a chunk's bytes: zeros
    done += n;
  }
  return 0;
}

std::string* FileContent::dirty_chunk(uint64_t i, int* err) {
  if (auto d = dirty_.find(i); d != dirty_.end()) return &d->second;
  std::string_view c;
  if ((*err = chunk(i, &c)) != 0) return nullptr;
  std::string& d = dirty_[i];
  d.assign(c);
  return &d;
}

int FileContent::write(uint64_t off, std::string_view data) {
  const uint64_t end = off + data.size();
  if (end > layout_->max_file || end < off) return EFBIG;
  if (end > size_) {
    size_ = end;
    ids_.resize(chunks_for(size_), 0);
  }
  modified_ = true;
  for (size_t done = 0; done < data.size();) {
    const uint64_t pos = off + done;
    const uint64_t i = pos / chunk_bytes_, in = pos % chunk_bytes_;
    const size_t n = static_cast<size_t>(std::min<uint64_t>(data.size() - done, chunk_bytes_ - in));
    int err = 0;
    std::string* c = dirty_chunk(i, &err);
    if (c == nullptr) return err;
    if (c->size() < in + n) c->resize(in + n);  // a gap before reads as zeros
    std::memcpy(c->data() + in, data.data() + done, n);
    done += n;
  }
  return dirty_.size() * chunk_bytes_ > kDirtyBudget ? spill() : 0;
}

int FileContent::truncate(uint64_t size) {
  if (size > layout_->max_file) return EFBIG;
  if (size >= size_) {  // bytes past the old end are zeros already: chunks end at size_
    modified_ = true;
    size_ = size;
    ids_.resize(chunks_for(size_), 0);
    return 0;
  }
  const uint64_t n = chunks_for(size);
  // The new last chunk keeps no bytes past the end, or a later growth would
  // show them again. Read first: a failed read changes nothing.
  // A hole holds no bytes to cut.
  const bool hole = n - 1 < ids_.size() && ids_[n - 1] == 0 && !dirty_.contains(n - 1);
  if (const uint64_t keep = size % chunk_bytes_; keep != 0 && !hole) {
    int err = 0;
    std::string* c = dirty_chunk(n - 1, &err);
    if (c == nullptr) return err;
    if (c->size() > keep) c->resize(keep);
  }
  for (uint64_t i = n; i < ids_.size(); i++) forget_id(ids_[i]);
  ids_.resize(n);
  dirty_.erase(dirty_.lower_bound(n), dirty_.end());
  size_ = size;
  modified_ = true;
  return 0;
}

int FileContent::zero(uint64_t off, uint64_t len) {
  const uint64_t end = std::min(size_, off + std::min(len, UINT64_MAX - off));
  for (uint64_t pos = off; pos < end;) {
    const uint64_t i = pos / chunk_bytes_, in = pos % chunk_bytes_;
    const uint64_t n = std::min(end - pos, chunk_bytes_ - in);
    pos += n;
    if (in == 0 && (n == chunk_bytes_ || pos == size_)) {  // the whole chunk: a hole
      if (ids_[i] == 0 && !dirty_.contains(i)) continue;  // one already
      dirty_.erase(i);
      forget_id(ids_[i]);
      ids_[i] = 0;
      modified_ = true;
      continue;
    }
    std::string_view have;  // bytes past a chunk's end are zeros already
    if (int err = chunk(i, &have)) return err;
    if (in >= have.size()) continue;
    int err = 0;
    std::string* c = dirty_chunk(i, &err);
    if (c == nullptr) return err;
    std::memset(c->data() + in, 0, static_cast<size_t>(std::min<uint64_t>(n, c->size() - in)));
    modified_ = true;
  }
  return dirty_.size() * chunk_bytes_ > kDirtyBudget ? spill() : 0;
}

void FileContent::forget_id(uint64_t id) {
  if (id == 0 || staged_.erase(id) == 0) return;
  if (cached_id_ == id) cached_id_ = 0;
  // Named by no manifest: if the remove fails, the next mount's sweep does it.
  pm::Status s = store_->remove(chunk_key(id));
  if (!s.ok() && !s.is_not_found()) ids_source_->leftovers = true;
}

int FileContent::put_chunk(uint64_t i, const std::string& data) {
  if (ids_source_->ready) {
    if (int err = to_errno(ids_source_->ready())) return err;
  }
  uint64_t id = ids_source_->next.fetch_add(1);
  if (g_fuse_planted_bugs.chunk_written_in_place && ids_[i] != 0) id = ids_[i];
  pm::Status s = store_->put(chunk_key(id), data);
  if (s.code() == pm::Code::kNoSpace && ids_source_->make_room && ids_source_->make_room()) {
    s = store_->put(chunk_key(id), data);
  }
  if (!s.ok()) return to_errno(s);
  if (id == ids_[i]) return 0;  // (the planted bug only)
  forget_id(ids_[i]);
  ids_[i] = id;
  staged_.insert(id);
  return 0;
}

int FileContent::spill() {
  for (auto d = dirty_.begin(); d != dirty_.end(); d = dirty_.erase(d)) {
    if (int err = put_chunk(d->first, d->second)) return err;
  }
  return 0;
}

void FileContent::hold_inline(std::string_view value) {
  dirty_.clear();
  ids_.assign(chunks_for(size_), 0);
  for (uint64_t i = 0; i < ids_.size(); i++) {
    dirty_[i].assign(value.substr(i * chunk_bytes_, chunk_bytes_));
  }
  cached_id_ = 0;
}

int FileContent::prepare(std::string* value, bool* chunked, bool* wrote_chunks) {
  *wrote_chunks = false;
  if (size_ <= layout_->inline_max) {
    if (int err = read(0, static_cast<size_t>(size_), value)) return err;
    // The value holds the content now; the chunks it was read from are
    // garbage once it commits (committed_ids_ and staged_ say which).
    hold_inline(*value);
    *chunked = result_chunked_ = false;
    return 0;
  }
  // Chunks staged by earlier spills count too: the manifest names them.
  *wrote_chunks = !dirty_.empty() || !staged_.empty();
  if (int err = spill()) return err;
  *chunked = result_chunked_ = true;
  *value = encode_manifest(Manifest{chunk_bytes_, size_, ids_});
  return 0;
}

int FileContent::seek(uint64_t off, bool data, uint64_t* out) const {
  if (off >= size_) return ENXIO;
  if (size_ <= layout_->inline_max) {  // stored as one value: all data
    *out = data ? off : size_;
    return 0;
  }
  const uint64_t n = chunks_for(size_);
  for (uint64_t i = off / chunk_bytes_; i < n; i++) {
    const bool present = (i < ids_.size() && ids_[i] != 0) || dirty_.contains(i);
    if (present == data) {
      *out = std::max(off, i * chunk_bytes_);
      return 0;
    }
  }
  if (data) return ENXIO;
  *out = size_;  // the end is a hole
  return 0;
}

uint64_t FileContent::hole_bytes(uint64_t from, uint64_t to) const {
  if (size_ <= layout_->inline_max) return 0;
  uint64_t holes = 0;
  const uint64_t n = chunks_for(std::min(to, size_));
  for (uint64_t i = from / chunk_bytes_; i < n; i++) {
    if ((i < ids_.size() && ids_[i] != 0) || dirty_.contains(i)) continue;
    holes += std::min<uint64_t>(chunk_bytes_, size_ - i * chunk_bytes_);
  }
  return holes;
}

std::vector<uint64_t> FileContent::committed() {
  std::unordered_set<uint64_t> named(ids_.begin(), ids_.end());
  std::vector<uint64_t> garbage;
  for (uint64_t id : committed_ids_) {
    if (id != 0 && !named.contains(id)) garbage.push_back(id);
  }
  for (uint64_t id : staged_) {
    if (!named.contains(id)) garbage.push_back(id);
  }
  staged_.clear();
  modified_ = false;
  committed_ids_ = result_chunked_ ? ids_ : std::vector<uint64_t>();
  return garbage;
}

std::vector<uint64_t> FileContent::abandon() {
  std::vector<uint64_t> staged(staged_.begin(), staged_.end());
  staged_.clear();
  loaded_ = modified_ = false;
  ids_.clear();
  committed_ids_.clear();
  dirty_.clear();
  cached_id_ = 0;
  std::string().swap(cached_);
  return staged;
}

}  // namespace pmfs
