// SwapFile on the real file systems of the test machine: the file is anonymous (nothing appears in
// the directory), aligned direct I/O round-trips, reserve() allocates real blocks and fails cleanly,
// bad directories give clear errors, and tmpfs falls back to buffered I/O where it refuses O_DIRECT.
//
// TMPDIR picks the file system under test. ZINF_TEST_NO_ODIRECT_DIR may name a directory on a file
// system known to refuse O_DIRECT (e.g. a ramfs mount) to check the buffered fallback there too.
#include "libengine/io/swap_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>

#include "libengine/memory/aligned_buffer.h"
#include "tests/catch.h"
#include "tests/temp_dir.h"

namespace zinf::io {
namespace {

using zinf::memory::AlignedBuffer;
using zinf::testing::TempDir;

constexpr std::uint64_t kMiB = 1ull << 20;

bool directory_is_empty(const std::string& path) {
  return std::filesystem::directory_iterator(path) == std::filesystem::directory_iterator();
}

std::uint64_t allocated_bytes(int fd) {
  struct stat st {};
  REQUIRE(::fstat(fd, &st) == 0);
  return static_cast<std::uint64_t>(st.st_blocks) * 512;
}

std::uint64_t file_size(int fd) {
  struct stat st {};
  REQUIRE(::fstat(fd, &st) == 0);
  return static_cast<std::uint64_t>(st.st_size);
}

// A buffer and I/O size that satisfy the file's alignment whatever it is.
std::size_t io_alignment(const SwapFile& file) {
  return std::max<std::size_t>({4096, file.memory_alignment(), file.offset_alignment()});
}

AlignedBuffer pattern_buffer(std::size_t bytes, std::size_t alignment, unsigned seed) {
  AlignedBuffer buffer = AlignedBuffer::allocate(bytes, alignment).value();
  for (std::size_t i = 0; i < bytes; ++i) buffer.data()[i] = static_cast<std::byte>((i * 131 + seed) & 0xffu);
  return buffer;
}

bool is_power_of_two(std::uint32_t value) { return value != 0 && (value & (value - 1)) == 0; }

TEST_CASE("swap file: anonymous in its directory, aligned I/O round-trips", "[swap_file]") {
  TempDir dir;
  auto created = SwapFile::create(dir.path(), /*allow_buffered_fallback=*/true);
  REQUIRE(created.is_ok());
  SwapFile& file = *created;
  CHECK(file.fd() >= 0);
  CHECK(file.directory() == dir.path());
  CHECK(file.size_bytes() == 0);
  CHECK(directory_is_empty(dir.path()));  // nothing to clean up, ever
  CHECK(file.direct() == file.why_buffered().empty());
  CHECK(is_power_of_two(file.memory_alignment()));
  CHECK(is_power_of_two(file.offset_alignment()));
  if (file.direct()) {
    CHECK((::fcntl(file.fd(), F_GETFL) & O_DIRECT) != 0);
    CHECK(file.offset_alignment() >= 512);
  } else {
    WARN("TMPDIR refuses O_DIRECT: " << file.why_buffered());
  }

  REQUIRE(file.reserve(4 * kMiB).is_ok());
  const std::size_t alignment = io_alignment(file);
  const AlignedBuffer written = pattern_buffer(kMiB, alignment, 7);
  const auto offset = static_cast<off_t>(alignment * 3);
  REQUIRE(::pwrite(file.fd(), written.data(), written.size(), offset) == static_cast<ssize_t>(written.size()));
  AlignedBuffer read = AlignedBuffer::allocate(kMiB, alignment).value();
  REQUIRE(::pread(file.fd(), read.data(), read.size(), offset) == static_cast<ssize_t>(read.size()));
  CHECK(std::memcmp(read.data(), written.data(), read.size()) == 0);
  CHECK(directory_is_empty(dir.path()));
}

TEST_CASE("swap file: reserve allocates real blocks, never shrinks, keeps contents", "[swap_file]") {
  TempDir dir;
  auto file = SwapFile::create(dir.path(), true).value();
  REQUIRE(file.reserve(8 * kMiB).is_ok());
  CHECK(file.size_bytes() == 8 * kMiB);
  CHECK(file_size(file.fd()) == 8 * kMiB);
  CHECK(allocated_bytes(file.fd()) >= 8 * kMiB);

  const std::size_t alignment = io_alignment(file);
  const AlignedBuffer written = pattern_buffer(alignment * 4, alignment, 3);
  REQUIRE(::pwrite(file.fd(), written.data(), written.size(), 0) == static_cast<ssize_t>(written.size()));

  REQUIRE(file.reserve(kMiB).is_ok());  // shrinking is a no-op
  CHECK(file.size_bytes() == 8 * kMiB);
  CHECK(file_size(file.fd()) == 8 * kMiB);

  REQUIRE(file.reserve(16 * kMiB).is_ok());
  CHECK(file.size_bytes() == 16 * kMiB);
  CHECK(allocated_bytes(file.fd()) >= 16 * kMiB);
  AlignedBuffer read = AlignedBuffer::allocate(written.size(), alignment).value();
  REQUIRE(::pread(file.fd(), read.data(), read.size(), 0) == static_cast<ssize_t>(read.size()));
  CHECK(std::memcmp(read.data(), written.data(), read.size()) == 0);
}

TEST_CASE("swap file: an impossible reserve fails, names the directory, and changes nothing", "[swap_file]") {
  TempDir dir;
  auto file = SwapFile::create(dir.path(), true).value();
  REQUIRE(file.reserve(kMiB).is_ok());
  const std::uint64_t blocks_before = allocated_bytes(file.fd());

  const Status status = file.reserve(1ull << 50);  // 1 PiB
  REQUIRE_FALSE(status.is_ok());
  CHECK(status.code() == ErrorCode::kIoError);
  CHECK_THAT(status.message(), Catch::StartsWith("swap path '" + dir.path() + "': "));
  // ENOSPC on any ordinary disk; EFBIG where the file system's size limit is hit first.
  CHECK_THAT(status.message(), Catch::Contains("no space for 1.00 PiB (needs") || Catch::Contains("too large"));
  CHECK(file.size_bytes() == kMiB);
  CHECK(file_size(file.fd()) == kMiB);
  CHECK(allocated_bytes(file.fd()) == blocks_before);

  const Status beyond_off_t = file.reserve(UINT64_MAX);
  REQUIRE_FALSE(beyond_off_t.is_ok());
  CHECK_THAT(beyond_off_t.message(), Catch::Contains(dir.path()));
  CHECK(file.size_bytes() == kMiB);
}

TEST_CASE("swap file: bad directories give clear errors", "[swap_file]") {
  TempDir dir;
  const std::string missing = dir.path() + "/does-not-exist";
  const auto missing_result = SwapFile::create(missing, true);
  REQUIRE_FALSE(missing_result.is_ok());
  CHECK(missing_result.status().code() == ErrorCode::kInvalidArgument);
  CHECK(missing_result.status().message() == "swap path '" + missing + "': does not exist");

  const std::string regular = dir.write("a-file", "not a directory");
  const auto regular_result = SwapFile::create(regular, true);
  REQUIRE_FALSE(regular_result.is_ok());
  CHECK(regular_result.status().code() == ErrorCode::kInvalidArgument);
  CHECK(regular_result.status().message() == "swap path '" + regular + "': is not a directory");

  const std::string read_only = dir.path() + "/read-only";
  REQUIRE(::mkdir(read_only.c_str(), 0500) == 0);
  const auto read_only_result = SwapFile::create(read_only, true);
  if (::geteuid() == 0) {
    // root ignores directory permissions (CAP_DAC_OVERRIDE), so there is no error to check.
    CHECK(read_only_result.is_ok());
  } else {
    REQUIRE_FALSE(read_only_result.is_ok());
    CHECK(read_only_result.status().code() == ErrorCode::kInvalidArgument);
    CHECK_THAT(read_only_result.status().message(), Catch::StartsWith("swap path '" + read_only + "': not writable") &&
                                                        Catch::Contains(std::strerror(EACCES)));
  }
  ::chmod(read_only.c_str(), 0700);  // so TempDir can remove it
}

// Checks the buffered fallback on a directory whose file system refuses O_DIRECT.
void check_buffered_fallback(const std::string& directory) {
  auto buffered = SwapFile::create(directory, true);
  REQUIRE(buffered.is_ok());
  CHECK_FALSE(buffered->direct());
  CHECK_THAT(buffered->why_buffered(), Catch::StartsWith("O_DIRECT not supported on " + directory + " ("));
  CHECK(buffered->memory_alignment() == 1);
  CHECK(buffered->offset_alignment() == 1);
  CHECK((::fcntl(buffered->fd(), F_GETFL) & O_DIRECT) == 0);
  // Unaligned I/O is fine on a buffered file.
  REQUIRE(buffered->reserve(kMiB).is_ok());
  const char text[] = "unaligned";
  REQUIRE(::pwrite(buffered->fd(), text, sizeof(text), 3) == static_cast<ssize_t>(sizeof(text)));
  char back[sizeof(text)] = {};
  REQUIRE(::pread(buffered->fd(), back, sizeof(back), 3) == static_cast<ssize_t>(sizeof(back)));
  CHECK(std::string(back) == text);

  const auto refused = SwapFile::create(directory, false);
  REQUIRE_FALSE(refused.is_ok());
  CHECK(refused.status().code() == ErrorCode::kIoError);
  CHECK_THAT(refused.status().message(), Catch::StartsWith("swap path '" + directory + "': O_DIRECT not supported") &&
                                             Catch::Contains("allow buffered I/O"));
}

TEST_CASE("swap file: tmpfs falls back to buffered I/O where it refuses O_DIRECT", "[swap_file]") {
  const std::string shm = "/dev/shm";
  if (!std::filesystem::is_directory(shm) || ::access(shm.c_str(), W_OK) != 0) {
    WARN("skipped: no writable /dev/shm");
    return;
  }
  auto probe = SwapFile::create(shm, true);
  REQUIRE(probe.is_ok());
  if (probe->direct()) {
    // Linux 6.6 and later accept O_DIRECT on tmpfs (served from the page cache), so there is
    // nothing to fall back from; refusing the fallback must then succeed too.
    WARN("/dev/shm accepts O_DIRECT on this kernel; buffered fallback not exercised here");
    CHECK(probe->why_buffered().empty());
    CHECK(SwapFile::create(shm, false).is_ok());
  } else {
    CHECK_THAT(probe->why_buffered(), Catch::Contains("tmpfs"));
    check_buffered_fallback(shm);
  }
}

TEST_CASE("swap file: a directory known to refuse O_DIRECT gives a buffered file", "[swap_file]") {
  const char* directory = std::getenv("ZINF_TEST_NO_ODIRECT_DIR");
  if (directory == nullptr || *directory == '\0') return;  // optional: set by hand, e.g. to a ramfs mount
  check_buffered_fallback(directory);
}

TEST_CASE("swap file: reopen_path reaches the same bytes from a new descriptor", "[swap_file]") {
  TempDir dir;
  auto file = SwapFile::create(dir.path(), true).value();
  REQUIRE(file.reserve(kMiB).is_ok());
  const std::size_t alignment = io_alignment(file);
  const AlignedBuffer written = pattern_buffer(alignment * 2, alignment, 11);
  REQUIRE(::pwrite(file.fd(), written.data(), written.size(), 0) == static_cast<ssize_t>(written.size()));

  CHECK(file.reopen_path() == "/proc/" + std::to_string(::getpid()) + "/fd/" + std::to_string(file.fd()));
  const int other = ::open(file.reopen_path().c_str(), O_RDONLY | O_CLOEXEC);
  REQUIRE(other >= 0);
  std::string back(written.size(), '\0');
  CHECK(::pread(other, back.data(), back.size(), 0) == static_cast<ssize_t>(back.size()));
  ::close(other);
  CHECK(std::memcmp(back.data(), written.data(), back.size()) == 0);
}

TEST_CASE("swap file: moves transfer the descriptor, destruction closes it", "[swap_file]") {
  TempDir dir;
  auto first = SwapFile::create(dir.path(), true).value();
  REQUIRE(first.reserve(kMiB).is_ok());
  const int fd = first.fd();

  SwapFile second(std::move(first));
  CHECK(first.fd() == -1);  // NOLINT(bugprone-use-after-move): the moved-from state is the contract
  CHECK(second.fd() == fd);
  CHECK(second.size_bytes() == kMiB);
  CHECK(second.directory() == dir.path());

  auto third = SwapFile::create(dir.path(), true).value();
  const int third_fd = third.fd();
  third = std::move(second);  // closes third's own file
  CHECK(third.fd() == fd);
  errno = 0;
  CHECK(::fcntl(third_fd, F_GETFD) == -1);
  CHECK(errno == EBADF);
  { SwapFile last(std::move(third)); }
  errno = 0;
  CHECK(::fcntl(fd, F_GETFD) == -1);
  CHECK(errno == EBADF);
}

TEST_CASE("swap file: free space of a directory", "[swap_file]") {
  TempDir dir;
  const auto free_bytes = free_space_bytes(dir.path());
  REQUIRE(free_bytes.is_ok());
  CHECK(*free_bytes > 0);

  const auto missing = free_space_bytes(dir.path() + "/missing");
  REQUIRE_FALSE(missing.is_ok());
  CHECK(missing.status().code() == ErrorCode::kIoError);
  CHECK_THAT(missing.status().message(),
             Catch::Contains(dir.path() + "/missing") && Catch::Contains(std::strerror(ENOENT)));
}

}  // namespace
}  // namespace zinf::io
