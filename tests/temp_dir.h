// TempDir: a private directory under the system temp dir for one test, removed with everything in
// it when the test ends. Shared by every test that writes files.
#pragma once

#include <cstdlib>  // mkdtemp (POSIX)
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>

namespace zinf::testing {

class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "zinf-test-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed for " + pattern);
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }

  // Writes `text` to `name` inside the directory and returns the file's path.
  std::string write(const std::string& name, const std::string& text) const {
    const std::string file = path_ + "/" + name;
    std::ofstream(file) << text;
    return file;
  }

 private:
  std::string path_;
};

}  // namespace zinf::testing
