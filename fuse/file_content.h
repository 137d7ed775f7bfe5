// FileContent: the bytes of one open file as the mount stores them
// (docs/fuse.md, "File content").
//
// A file of at most Layout::inline_max bytes (the store's value limit) is
// one value at its data key, which kv users see as the file. A larger file
// is chunked: its metadata record says so (Meta::chunked) and the data key
// holds a manifest naming, for each chunk of Layout::chunk_bytes, the id of
// a value at chunk_key(id), or 0 for a hole that reads as zeros.
//
// Chunks are copy-on-write. The invariant an atomic rewrite rests on:
// **no put ever goes to a chunk id that a committed manifest names.** A
// changed chunk is written under a fresh id, so the committed file stays
// whole until one transaction puts the new manifest with the metadata
// record; the ids that manifest drops are garbage from then on (Fs removes
// them once that transaction is durable). A crash in between leaves chunks
// no manifest names, which the next mount removes (Fs::build_index).
//
// Memory: changed chunks stay in DRAM up to kDirtyBudget bytes; past it they
// are written out under fresh ids (staged: named by no committed manifest)
// and only their ids are kept, so a file of any size streams through.
//
// Thread safety: none; FileData::mu guards it.
#ifndef PMFS_FILE_CONTENT_H_
#define PMFS_FILE_CONTENT_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "kv/store.h"

namespace pmfs {

inline constexpr std::string_view kChunkPrefix{"\0c", 2};
inline constexpr size_t kDirtyBudget = 16u << 20;

// "\0c" + id, big-endian: chunks sort by id.
std::string chunk_key(uint64_t id);
// The id of a chunk key; nullopt for any other key.
std::optional<uint64_t> chunk_id(std::string_view key);

// The manifest at a chunked file's data key (little-endian):
//   u8 version (1), u8 0, u16 0, u32 chunk_bytes, u64 size, u64 id[n]
// with n = ceil(size / chunk_bytes).
struct Manifest {
  uint32_t chunk_bytes = 0;
  uint64_t size = 0;
  std::vector<uint64_t> ids;
};
inline constexpr size_t kManifestHeaderBytes = 16;
std::string encode_manifest(const Manifest& m);
// The bytes of a chunked file of `size` that its holes (chunks of id 0)
// hold: what st_blocks leaves out.
uint64_t hole_bytes(uint32_t chunk_bytes, uint64_t size, const std::vector<uint64_t>& ids);
// nullopt when the value is not a well-formed manifest.
std::optional<Manifest> decode_manifest(std::string_view value);

struct Layout {
  uint64_t inline_max = 0;   // larger files are chunked
  uint32_t chunk_bytes = 0;  // of new chunked files
  uint64_t max_file = 0;     // EFBIG past it
};

// Chunk ids, handed out to every file of a mount: above every chunk id the
// store holds or a manifest names, once `ready` (if set) has succeeded. A
// mount that reads directories at first use learns that bound only then
// (Fs::learn_ids); `ready` is cheap after its first success.
struct ChunkIds {
  std::atomic<uint64_t> next{1};
  std::function<pm::Status()> ready;
  // Fs::make_room: a put refused for room is tried once more when it
  // returns true.
  std::function<bool()> make_room;
  // A chunk no manifest names could not be removed: the mount must not
  // say it ended cleanly (kCleanKey), so that the next one sweeps it.
  std::atomic<bool> leftovers{false};
};

class FileContent {
 public:
  FileContent(kv::Store* store, const Layout* layout, ChunkIds* ids)
      : store_(store), layout_(layout), ids_source_(ids) {}

  // Takes the file's committed form: `value` is its data key's value (a
  // manifest when `chunked`; `key` names it in messages). Chunk data is read
  // lazily.
  void load(std::string_view value, bool chunked, std::string_view key);
  bool loaded() const { return loaded_; }
  // Changed since load or the last commit.
  bool modified() const { return modified_; }
  uint64_t size() const { return size_; }

  int read(uint64_t off, size_t len, std::string* out);
  int write(uint64_t off, std::string_view data);  // EFBIG past layout.max_file
  int truncate(uint64_t size);                     // EFBIG past layout.max_file
  // Zeros [off, off + len) within the file (fallocate's punch and zero
  // ranges; the size stays): whole chunks become holes, which hold no data.
  int zero(uint64_t off, uint64_t len);

  // lseek's SEEK_DATA (data) or SEEK_HOLE from off: sets *out, or returns
  // ENXIO at or past the end (and for SEEK_DATA past the last data). Holes
  // are whole chunks of a chunked file; a file stored inline is all data.
  int seek(uint64_t off, bool data, uint64_t* out) const;
  // The bytes holes hold (prepare stores them so: none when inline), in
  // the whole file or in the chunks that [from, to) overlaps.
  uint64_t hole_bytes() const { return hole_bytes(0, size_); }
  uint64_t hole_bytes(uint64_t from, uint64_t to) const;

  // Writes every changed chunk out (a chunked result) and sets *value to
  // what the data key is to hold and *chunked to its form; *wrote_chunks
  // when the manifest names chunks put since the last commit, here or by
  // earlier spills (they must be durable before the manifest is).
  int prepare(std::string* value, bool* chunked, bool* wrote_chunks);
  // After the transaction holding prepare's value committed: the chunk ids
  // no manifest names any more (garbage once that transaction is durable).
  std::vector<uint64_t> committed();
  // Forgets everything (loaded() false: the next use reads the store);
  // returns the staged ids, which no committed manifest names.
  std::vector<uint64_t> abandon();

 private:
  uint64_t chunks_for(uint64_t size) const;
  // Chunk i's bytes (may be shorter than the chunk: zeros follow).
  int chunk(uint64_t i, std::string_view* out);
  std::string* dirty_chunk(uint64_t i, int* err);
  int spill();
  // Holds an inline value (size_ bytes) as the dirty chunks it would be.
  void hold_inline(std::string_view value);
  int put_chunk(uint64_t i, const std::string& data);
  // Chunk id is no longer named by ids_: a staged one is removed at once.
  void forget_id(uint64_t id);

  kv::Store* store_;
  const Layout* layout_;
  ChunkIds* ids_source_;

  bool loaded_ = false, modified_ = false;
  uint64_t size_ = 0;
  uint32_t chunk_bytes_ = 0;             // of this file (its manifest's, or the layout's)
  std::vector<uint64_t> ids_;            // chunk i's id, 0 when a hole or only in dirty_
  std::map<uint64_t, std::string> dirty_;  // chunk -> bytes to be written
  std::vector<uint64_t> committed_ids_;  // what the committed manifest names
  std::unordered_set<uint64_t> staged_;  // put, named by no committed manifest
  uint64_t cached_id_ = 0;               // one chunk read, for sequential reads
  std::string cached_;
  bool result_chunked_ = false;
};

}  // namespace pmfs

#endif  // PMFS_FILE_CONTENT_H_
