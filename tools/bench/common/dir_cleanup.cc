#include "bench/common/dir_cleanup.h"

#include <unistd.h>

#include <filesystem>
#include <system_error>

#include "bench/common/interrupt.h"

namespace pm::bench {

namespace {

// Removes `dir` if empty, then its parents up to `top` while empty.
void remove_empty_up_to(std::filesystem::path dir, const std::filesystem::path& top) {
  std::error_code ec;
  for (;;) {
    if (!std::filesystem::remove(dir, ec) || ec) return;  // not empty, or not ours
    if (dir == top || !dir.has_parent_path() || dir.parent_path() == dir) return;
    dir = dir.parent_path();
  }
}

}  // namespace

std::string first_missing_dir(const std::string& dir) {
  std::error_code ec;
  std::filesystem::path p = std::filesystem::absolute(dir, ec);
  if (ec) return "";
  std::string missing;
  while (!p.empty() && !std::filesystem::exists(p, ec)) {
    missing = p.string();
    if (p.parent_path() == p) break;
    p = p.parent_path();
  }
  return missing;
}

DirCleanup::~DirCleanup() {
  if (top_.empty()) return;
  forget_dir(top_);
  std::error_code ec;
  remove_empty_up_to(std::filesystem::absolute(dir_, ec), top_);
}

Result<std::unique_ptr<RunDir>> RunDir::make(const std::string& parent, const std::string& name) {
  if (parent.empty()) return Status::invalid_argument("the directory is empty ('')");
  const std::string top = first_missing_dir(parent);
  std::error_code ec;
  std::filesystem::create_directories(parent, ec);
  if (ec) return Status::io_error("create directory " + parent + ": " + ec.message());
  const std::string path = parent + "/" + name + "." + std::to_string(::getpid());
  remove_tree(path);  // a run of an earlier process with this pid, killed
  std::filesystem::create_directory(path, ec);
  if (ec) return Status::io_error("create directory " + path + ": " + ec.message());
  remove_on_interrupt(top.empty() ? path : top);
  return std::unique_ptr<RunDir>(new RunDir(path, top));
}

RunDir::~RunDir() {
  forget_dir(top_.empty() ? path_ : top_);
  remove_tree(path_);
  std::error_code ec;
  if (!top_.empty()) remove_empty_up_to(std::filesystem::absolute(path_, ec).parent_path(), top_);
}

}  // namespace pm::bench
