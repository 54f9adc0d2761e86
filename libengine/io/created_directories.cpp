#include "libengine/io/created_directories.h"

#include <unistd.h>

#include <utility>

namespace zinf::io {

CreatedDirectories::~CreatedDirectories() { remove_created(); }

CreatedDirectories::CreatedDirectories(CreatedDirectories&& other) noexcept
    : created_(std::exchange(other.created_, {})) {}

CreatedDirectories& CreatedDirectories::operator=(CreatedDirectories&& other) noexcept {
  if (this != &other) {
    remove_created();
    created_ = std::exchange(other.created_, {});
  }
  return *this;
}

std::error_code CreatedDirectories::create(const std::string& path) {
  namespace fs = std::filesystem;
  // The missing ancestors, nearest the root first: the ones create_directories will make.
  std::vector<fs::path> missing;
  std::error_code ec;
  for (fs::path p = fs::path(path).lexically_normal(); !p.empty(); p = p.parent_path()) {
    // "a/b/" normalises to "a/b/": its last element is empty, the directory is its parent.
    if (!p.has_filename() && p.has_relative_path()) continue;
    if (fs::exists(fs::symlink_status(p, ec)) || p == p.root_path()) break;
    missing.insert(missing.begin(), p);
    if (p.parent_path() == p) break;
  }
  // One level at a time, so that what exists afterwards and was missing before is exactly what
  // this call made (a directory another process makes in between is not ours to remove).
  for (const fs::path& p : missing) {
    if (fs::create_directory(p, ec)) {
      created_.push_back(p);
    } else if (ec) {
      return ec;
    }
  }
  // What create_directories would still report (a path through a file, a dangling link).
  if (!fs::is_directory(path, ec)) return ec ? ec : std::make_error_code(std::errc::not_a_directory);
  return {};
}

void CreatedDirectories::remove_created() noexcept {
  for (auto it = created_.rbegin(); it != created_.rend(); ++it) (void)::rmdir(it->c_str());
  created_.clear();
}

}  // namespace zinf::io
