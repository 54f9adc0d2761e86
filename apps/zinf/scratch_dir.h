// ScratchDir: a private directory under the system's temporary directory (mkdtemp) for a command's
// intermediate files — scenario copies, the records of child runs — removed with the object on every
// path (success, bad input, a failed child run, a stop). Used by `bench scaling` and `bench ab`.
// Not thread-safe; movable, not copyable.
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>

#include <fmt/format.h>

#include "libengine/core/status.h"

namespace zinf::cli {

class ScratchDir {
 public:
  // Creates `<tmp>/<prefix>XXXXXX`. `who` names the command in errors ("bench ab"). IoError when
  // there is no temporary directory or it refuses the new one.
  static Result<ScratchDir> create(std::string_view who, std::string_view prefix) {
    std::error_code error;
    const std::filesystem::path base = std::filesystem::temp_directory_path(error);
    if (error) return Status::io_error(fmt::format("{}: no temporary directory: {}", who, error.message()));
    std::string pattern = (base / (std::string(prefix) + "XXXXXX")).string();
    if (::mkdtemp(pattern.data()) == nullptr) {
      return Status::io_error(fmt::format("{}: cannot create a directory under {}", who, base.string()));
    }
    return ScratchDir(pattern);
  }
  ScratchDir(ScratchDir&& other) noexcept : path_(std::exchange(other.path_, {})) {}
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  ScratchDir& operator=(ScratchDir&&) = delete;
  ~ScratchDir() {
    std::error_code ignored;
    if (!path_.empty()) std::filesystem::remove_all(path_, ignored);
  }
  const std::filesystem::path& path() const { return path_; }

 private:
  explicit ScratchDir(std::filesystem::path path) : path_(std::move(path)) {}
  std::filesystem::path path_;
};

}  // namespace zinf::cli
