// Key names: how store keys map to paths, and the records the mount keeps
// beside them (docs/fuse.md, "Key mapping").
//
// A user key is split at '/' into components; each component is one file
// name. A component is its own name ('%' included) unless it cannot be a
// file name (empty, ".", "..", containing NUL) or is itself an escape; those
// are escaped: "%%" followed by the component with '%' written "%25" and
// NUL written "%00". A name is an escape when it starts with "%%", the rest
// decodes, and the decoded component is one that is escaped: "%%" is the
// empty component and "%%.." is "..", but "%%x" is just the name "%%x"
// (the component "x" is named "x"). The rule is a bijection between all
// components and all file names: every name a user can create is accepted.
//
// Keys whose first byte is NUL are reserved for the mount:
//   "\0m" + key   the metadata record of the file whose data is at key
//   "\0d" + dir   the marker (and metadata record) of directory dir, the
//                 key prefix without its trailing '/'; "\0d" is the root
//   "\0x" + key   the extended attributes of the file at key, or of the
//                 directory with that prefix (only while it has any)
//   "\0i" + id    (8 bytes, big-endian) the content of a file with hard
//                 links; its record and attributes are at "\0m\0i" + id and
//                 "\0x\0i" + id, and each of its names is a data key holding
//                 the id, with a record whose link flag is set
//   "\0c" + id    (8 bytes, big-endian) a chunk of a large file (file_content.h)
//   "\0r"         a directory rename too large for one transaction, from
//                 its first transaction to its last: u32 length of the
//                 old directory key (little-endian), the old key, the new
//                 key. The next mount finishes it (Fs::finish_rename)
//   "\0n"         the next stable inode number a mount may hand out (8
//                 bytes, little-endian): every number a record holds is
//                 below it (Fs::take_ino)
//   "\0u"         put by a mount that ended cleanly (every chunk it discarded
//                 removed, durably): the store's sequence number its put
//                 took (8 bytes, little-endian). Unless no update followed
//                 it, a store with chunks is read whole at mount and the
//                 chunks no manifest names are swept (Fs::ended_cleanly)
// A data key and its record change in one transaction.
#ifndef PMFS_KEY_NAMES_H_
#define PMFS_KEY_NAMES_H_

#include <bit>
#include <cstdint>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace pmfs {

inline constexpr std::string_view kMetaPrefix{"\0m", 2};
inline constexpr std::string_view kDirPrefix{"\0d", 2};
inline constexpr std::string_view kXattrPrefix{"\0x", 2};
inline constexpr std::string_view kInodePrefix{"\0i", 2};
inline constexpr std::string_view kCleanKey{"\0u", 2};
inline constexpr std::string_view kRenameKey{"\0r", 2};
inline constexpr std::string_view kInoKey{"\0n", 2};
// Stable inode numbers (Meta::ino) are below this; a mount numbers the
// nodes without one from here up (InodeTable), so the two never meet.
// (2^32: both fit 32-bit programs' stat for the first 4 billion creations.)
inline constexpr uint64_t kStableInoEnd = uint64_t{1} << 32;
// Inode and chunk ids count up from 1; one at or above this is a damaged
// value's, and new ids are not moved above it (the next id would wrap to
// 0, a chunk id's hole).
inline constexpr uint64_t kMaxId = uint64_t{1} << 62;
inline constexpr size_t kNameMax = 255;

// The file name of key component `component` (see the file comment).
std::string encode_name(std::string_view component);
// The component named by `name`; nullopt only for what cannot be a file
// name (empty, ".", "..", NUL inside).
std::optional<std::string> decode_name(std::string_view name);

// The file names of `key`'s components, or nullopt when the key is
// reserved (leading NUL), starts with '/' (its first name would be the
// root's "%%", which is refused) or a name would exceed kNameMax.
std::optional<std::vector<std::string>> key_to_names(std::string_view key);

// The key of the entry `component` in the directory with key `dir` ("" for
// the root).
std::string child_key(std::string_view dir, std::string_view component);

// prefix + id as 8 big-endian bytes (chunk and inode keys; with an empty
// prefix, the value of a hard link's name).
std::string id_key(std::string_view prefix, uint64_t id);
// The id of such a key; nullopt for any other.
std::optional<uint64_t> key_id(std::string_view prefix, std::string_view key);
inline std::string inode_key(uint64_t id) { return id_key(kInodePrefix, id); }

// Metadata kept with a key. Times are nanoseconds since the epoch.
struct Meta {
  uint32_t mode = 0;  // type and permission bits, as st_mode
  uint32_t uid = 0;
  uint32_t gid = 0;
  int64_t mtime_ns = 0;
  int64_t ctime_ns = 0;
  int64_t atime_ns = 0;  // set by creation and utimensat only (reads leave it: noatime)
  uint64_t rdev = 0;     // device nodes: the device number
  bool chunked = false;  // regular files: the data key holds a manifest (file_content.h)
  bool link = false;     // a name of a file with hard links: the data key holds the id
  // The inode number the file or directory keeps across mounts (its
  // st_ino), given at creation; 0: none (a key put by 'pm kv', an older
  // record), numbered by each mount instead.
  uint64_t ino = 0;
};

// The stored form of Meta (little-endian, docs/fuse.md "Records"):
//   u8 version (1), u8 flags, u16 reserved, u32 mode, u32 uid, u32 gid,
//   i64 mtime_ns, i64 ctime_ns                              -> 32 bytes
// flags: bit 0 (kMetaChunked) is Meta::chunked, bit 1 (kMetaLink)
// Meta::link, bit 2 (kMetaIno): a u64 Meta::ino ends the record; the
// others are 0.
// Version 2 appends i64 atime_ns, u64 rdev (48 bytes). It is written only
// when atime differs from mtime or rdev is set; version 1 means atime ==
// mtime and no device, so most records stay 32 bytes (40 with an inode
// number, which readers older than it ignore).
inline constexpr size_t kMetaRecordBytes = 32;
inline constexpr size_t kMetaRecordV2Bytes = 48;
inline constexpr uint8_t kMetaChunked = 1;
inline constexpr uint8_t kMetaLink = 2;
inline constexpr uint8_t kMetaIno = 4;
inline constexpr size_t kMetaRecordMaxBytes = kMetaRecordV2Bytes + 8;  // with an inode number
std::string encode_meta(const Meta& m);
// nullopt when the record is too short or of an unknown version.
std::optional<Meta> decode_meta(std::string_view record);

// Fixed-width fields of the records, little-endian.
template <typename T>
void put_le(std::string* out, size_t off, T v) {
  static_assert(std::endian::native == std::endian::little, "records are little-endian");
  std::memcpy(out->data() + off, &v, sizeof v);
}
template <typename T>
T get_le(std::string_view in, size_t off) {
  T v;
  std::memcpy(&v, in.data() + off, sizeof v);
  return v;
}

// Extended attributes, name -> value; stored as repeated
// (u32 name length, name, u32 value length, value), little-endian.
using Xattrs = std::map<std::string, std::string>;
std::string encode_xattrs(const Xattrs& x);
// nullopt when the record is damaged.
std::optional<Xattrs> decode_xattrs(std::string_view record);

}  // namespace pmfs

#endif  // PMFS_KEY_NAMES_H_
