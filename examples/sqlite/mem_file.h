// pmsqlite::MemFiles: the files a pm database keeps in DRAM: its rollback
// journal (and a super-journal). They need not survive a crash: the
// database file changes only at commit(), atomically, so there is never a
// journal to play back after a restart; SQLite still writes one to serve
// ROLLBACK and statement rollback, and that works from DRAM.
//
// A file lives from its first open with SQLITE_OPEN_CREATE until xDelete
// (or its last close, with SQLITE_OPEN_DELETEONCLOSE), like a file in a
// directory; names are the full paths SQLite asks for.
#ifndef PMSQLITE_MEM_FILE_H_
#define PMSQLITE_MEM_FILE_H_

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace pmsqlite {

class MemFile {
 public:
  // Copies [off, off+n) into buf; zero-fills past the end. Bytes inside.
  size_t read(void* buf, size_t n, uint64_t off) const;
  void write(const void* buf, size_t n, uint64_t off);
  void truncate(uint64_t size);
  uint64_t size() const;

 private:
  mutable std::mutex mu_;
  std::vector<unsigned char> bytes_;
};

namespace mem_files {
// The file named `name`: opened, made when `create`, or nullptr.
std::shared_ptr<MemFile> open(const std::string& name, bool create);
// True when it exists and is not empty (what SQLite's unix VFS answers
// for SQLITE_ACCESS_EXISTS).
bool exists(const std::string& name);
bool known(const std::string& name);
void remove(const std::string& name);
}  // namespace mem_files

}  // namespace pmsqlite

#endif  // PMSQLITE_MEM_FILE_H_
