// CreatedDirectories (issue 24): a failed run left /nonexistent/deeply/nvme behind. What it created
// is removed deepest first, only while empty; what existed before is never touched.
#include "libengine/io/created_directories.h"

#include <filesystem>
#include <fstream>
#include <string>

#include "tests/catch.h"
#include "tests/temp_dir.h"

namespace zinf::io {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

TEST_CASE("created directories: the missing parents are created, remembered and removed deepest first") {
  TempDir dir;
  const std::string deep = dir.path() + "/a/b/c";
  {
    CreatedDirectories created;
    REQUIRE_FALSE(created.create(deep));
    CHECK(fs::is_directory(deep));
    REQUIRE(created.created().size() == 3);
    CHECK(created.created()[0] == fs::path(dir.path() + "/a"));
    CHECK(created.created()[2] == fs::path(deep));
    // A second path under the same parents remembers only its own level; a trailing slash and an
    // existing directory add nothing.
    REQUIRE_FALSE(created.create(dir.path() + "/a/b/d/"));
    REQUIRE_FALSE(created.create(deep + "/"));
    REQUIRE_FALSE(created.create(dir.path()));
    CHECK(created.created().size() == 4);
  }
  CHECK_FALSE(fs::exists(dir.path() + "/a"));
  CHECK(fs::is_directory(dir.path()));
}

TEST_CASE("created directories: a directory filled since is kept, and so are its parents") {
  TempDir dir;
  CreatedDirectories created;
  REQUIRE_FALSE(created.create(dir.path() + "/a/b/c"));
  std::ofstream(dir.path() + "/a/b/note.txt") << "mine";
  created.remove_created();
  CHECK_FALSE(fs::exists(dir.path() + "/a/b/c"));
  CHECK(fs::exists(dir.path() + "/a/b/note.txt"));
  CHECK(created.created().empty());
}

TEST_CASE("created directories: a failure part way keeps what was created for removal") {
  TempDir dir;
  const std::string file = dir.write("file", "x");
  CreatedDirectories created;
  CHECK(created.create(file + "/sub"));  // a path through a file
  CHECK(created.created().empty());
  REQUIRE_FALSE(created.create(dir.path() + "/made"));
  CreatedDirectories moved = std::move(created);
  CHECK(moved.created().size() == 1);
  moved.remove_created();
  CHECK_FALSE(fs::exists(dir.path() + "/made"));
}

}  // namespace
}  // namespace zinf::io
