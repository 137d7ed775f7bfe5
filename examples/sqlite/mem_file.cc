#include "mem_file.h"

#include <algorithm>
#include <cstring>
#include <map>

namespace pmsqlite {

size_t MemFile::read(void* buf, size_t n, uint64_t off) const {
  std::lock_guard<std::mutex> g(mu_);
  const size_t inside =
      off >= bytes_.size() ? 0 : static_cast<size_t>(std::min<uint64_t>(n, bytes_.size() - off));
  if (inside > 0) std::memcpy(buf, bytes_.data() + off, inside);
  std::memset(static_cast<unsigned char*>(buf) + inside, 0, n - inside);
  return inside;
}

void MemFile::write(const void* buf, size_t n, uint64_t off) {
  std::lock_guard<std::mutex> g(mu_);
  if (off + n > bytes_.size()) bytes_.resize(off + n);
  std::memcpy(bytes_.data() + off, buf, n);
}

void MemFile::truncate(uint64_t size) {
  std::lock_guard<std::mutex> g(mu_);
  if (size < bytes_.size()) {
    bytes_.resize(size);
    bytes_.shrink_to_fit();
  }
}

uint64_t MemFile::size() const {
  std::lock_guard<std::mutex> g(mu_);
  return bytes_.size();
}

namespace mem_files {
namespace {
std::mutex g_mu;
std::map<std::string, std::shared_ptr<MemFile>>& files() {
  static auto* f = new std::map<std::string, std::shared_ptr<MemFile>>;
  return *f;
}
}  // namespace

std::shared_ptr<MemFile> open(const std::string& name, bool create) {
  std::lock_guard<std::mutex> g(g_mu);
  auto it = files().find(name);
  if (it != files().end()) return it->second;
  if (!create) return nullptr;
  auto f = std::make_shared<MemFile>();
  files()[name] = f;
  return f;
}

bool exists(const std::string& name) {
  std::lock_guard<std::mutex> g(g_mu);
  auto it = files().find(name);
  return it != files().end() && it->second->size() > 0;
}

bool known(const std::string& name) {
  std::lock_guard<std::mutex> g(g_mu);
  return files().count(name) != 0;
}

void remove(const std::string& name) {
  std::lock_guard<std::mutex> g(g_mu);
  files().erase(name);
}

}  // namespace mem_files
}  // namespace pmsqlite
