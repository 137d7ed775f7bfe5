// pmsqlite::MemFiles: the files a pm database keeps in DRAM: its rollback
// journal (and a super-journal). They need not survive a crash: the
// database file changes only at commit(), atomically, so there is never a
// journal to play back after a restart; SQLite still writes one to serve
// ROLLBACK and statement rollback, and that works from DRAM.
//
// A journal's page records hold the pages a transaction changes as they
// were when it began, which is what the container's last commit holds:
// so a record whose page equals the committed page (it always does) is
// kept as a reference to it, not as a copy, past the journal's first
// kCopiedBytes (a small transaction's records stay copies: a copy costs
// less than the comparison, and its rollback reads no file). An update of
// 300 MB held 300 MB of journal in DRAM before; now a few bytes a page.
// A reference is valid only while that commit is the last one
// (OldPages::committed_state): SQLite reads a journal's records to roll
// back before the database's commit, except in a transaction over several
// databases, which may roll one back after its commit. So before a commit
// the VFS copies the pages in (keep_old_pages()) when another database
// may be in the transaction, and after it empties a journal that still
// refers (vfs.cc, db_sync_commit).
//
// A file lives from its first open with SQLITE_OPEN_CREATE until xDelete
// (or its last close, with SQLITE_OPEN_DELETEONCLOSE), like a file in a
// directory; names are the full paths SQLite asks for.
#ifndef PMSQLITE_MEM_FILE_H_
#define PMSQLITE_MEM_FILE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "pm/status.h"

namespace pmsqlite {

// The committed pages of the database a journal belongs to.
class OldPages {
 public:
  virtual ~OldPages() = default;
  // Names the committed state now: it changes at every commit.
  virtual uint64_t committed_state() const = 0;
  // Copies [off, off+n) of the database file as committed, when that is
  // still `state`; an error otherwise, or when it is not known.
  virtual pm::Status read_committed(void* buf, size_t n, uint64_t off, uint64_t state) const = 0;
};

class MemFile {
 public:
  // Page records below this offset are always copies.
  static constexpr uint64_t kCopiedBytes = 256 << 10;

  // Copies [off, off+n) into buf; zero-fills past the end. Returns the
  // bytes inside, or why an old page could not be read again.
  pm::Result<size_t> read(void* buf, size_t n, uint64_t off) const;
  void write(const void* buf, size_t n, uint64_t off);
  void truncate(uint64_t size);
  uint64_t size() const;

  // The database whose journal this is: page records are kept as
  // references to its committed pages from now on.
  void set_old_pages(std::weak_ptr<const OldPages> pages);
  // Copies every referenced page into DRAM, so that the journal stays
  // readable after the database's next commit.
  pm::Status keep_old_pages();
  // True when the journal ends with SQLite's super-journal record (the
  // journal of one database in a transaction over several).
  bool names_super_journal() const;
  // True when some page record is a reference.
  bool has_references() const;
  // The file's bytes held in DRAM (references not counted), and the DRAM
  // their pieces take (room reserved for appends included).
  uint64_t held_bytes() const;
  uint64_t dram_bytes() const;

 private:
  // A written range: its bytes, or where the database holds them.
  struct Piece {
    uint64_t len = 0;
    std::string bytes;  // len bytes, unless ref
    bool ref = false;
    uint64_t page_off = 0;  // ref: the database file offset of the first byte
    uint64_t state = 0;     // ref: OldPages::committed_state() when it was made
  };

  bool as_reference(const void* buf, size_t n, uint64_t off, Piece* p) const;
  void split_at(uint64_t at);
  void erase(uint64_t from, uint64_t to);
  pm::Status read_locked(void* buf, size_t n, uint64_t off) const;

  mutable std::mutex mu_;
  std::map<uint64_t, Piece> pieces_;  // by offset; none overlap; holes read as zeros
  uint64_t size_ = 0;
  std::weak_ptr<const OldPages> old_pages_;
};

namespace mem_files {
// The file named `name`: opened, made when `create`, or nullptr.
std::shared_ptr<MemFile> open(std::string_view name, bool create);
// Whether a file of that name is kept here, and empty (SQLite's unix VFS
// answers SQLITE_ACCESS_EXISTS for an empty file with "no").
enum class Presence { kUnknown, kEmpty, kNotEmpty };
Presence presence(std::string_view name);
// Removes it; false when there was none.
bool remove(std::string_view name);
}  // namespace mem_files

}  // namespace pmsqlite

#endif  // PMSQLITE_MEM_FILE_H_
