// CreatedDirectories: creates a directory with its missing parents and remembers which ones it
// created, so that they can be removed again (deepest first, each only while empty) when the run
// that needed them ends. A swap directory such as /nonexistent/deeply/nvme must not outlive a run
// that failed (or finished): zinf removes what it made and nothing else.
#pragma once

#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

namespace zinf::io {

class CreatedDirectories {
 public:
  CreatedDirectories() = default;
  // Removes what it created (remove_created()).
  ~CreatedDirectories();
  CreatedDirectories(CreatedDirectories&& other) noexcept;
  CreatedDirectories& operator=(CreatedDirectories&& other) noexcept;
  CreatedDirectories(const CreatedDirectories&) = delete;
  CreatedDirectories& operator=(const CreatedDirectories&) = delete;

  // Creates `path` and its missing parents (as std::filesystem::create_directories). The ones this
  // call created are remembered, also when it fails part way; the error is returned. Directories
  // that already existed are never remembered. Not thread-safe.
  std::error_code create(const std::string& path);

  // Removes the remembered directories, deepest (latest created) first, each only if it is empty
  // (rmdir): a directory someone filled since is kept, and so are its parents. Forgets them all.
  void remove_created() noexcept;

  // The directories created and not yet removed, in creation order (parents before children).
  const std::vector<std::filesystem::path>& created() const { return created_; }

 private:
  std::vector<std::filesystem::path> created_;
};

}  // namespace zinf::io
