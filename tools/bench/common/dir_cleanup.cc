#include "bench/common/dir_cleanup.h"

#include <unistd.h>

#include <filesystem>
#include <system_error>

#include "bench/common/interrupt.h"

namespace pm::bench {

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

Result<std::string> make_run_dir(const std::string& parent, const std::string& name,
                                 std::string* top) {
  if (parent.empty()) return Status::invalid_argument("the directory is empty ('')");
  *top = first_missing_dir(parent);
  std::error_code ec;
  std::filesystem::create_directories(parent, ec);
  if (ec) return Status::io_error("create directory " + parent + ": " + ec.message());
  const std::string path = parent + "/" + name + "." + std::to_string(::getpid());
  remove_tree(path);  // a run of an earlier process with this pid, killed
  std::filesystem::create_directory(path, ec);
  if (ec) return Status::io_error("create directory " + path + ": " + ec.message());
  remove_on_interrupt(path, *top);
  return path;
}

void remove_run_dir(const std::string& path, const std::string& top) {
  forget_dir(path);
  remove_tree(path);
  remove_empty_up_to(std::filesystem::path(path).parent_path().string(), top);
}

Result<std::unique_ptr<RunDir>> RunDir::make(const std::string& parent, const std::string& name) {
  std::string top;
  Result<std::string> path = make_run_dir(parent, name, &top);
  if (!path.ok()) return path.status();
  return std::unique_ptr<RunDir>(new RunDir(*path, top));
}

}  // namespace pm::bench
