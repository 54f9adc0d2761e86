// Checkpoints on the real file system of the test machine (a TempDir): bit-exact round trip of the
// arrays and the meta; every kind of damage (flipped data byte, flipped header byte, truncation, bad
// magic, unknown version, other arrays) is refused with an error naming the file and the array;
// keep_last prunes the oldest; a save that cannot create its directory or runs out of space
// (RLIMIT_FSIZE stands in for a full disk, since tests run as root) fails with an I/O error naming
// the path, leaves no .tmp file and leaves the earlier checkpoint loadable.
#include "libengine/train/checkpoint.h"

#include <sys/resource.h>

#include <csignal>
#include <cstring>
#include <fstream>
#include <iterator>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "libengine/io/checksum.h"
#include "tests/catch.h"
#include "tests/temp_dir.h"
#include "tests/unit/train/flip_byte.h"

namespace zinf::train {
namespace {

namespace fs = std::filesystem;
using testing::flip_byte;
using zinf::testing::TempDir;

// Owns the values a test saves and loads; hands out NamedArrays over them.
struct Arrays {
  std::vector<std::string> names;
  std::vector<std::vector<float>> values;

  void add(std::string name, std::vector<float> data) {
    names.push_back(std::move(name));
    values.push_back(std::move(data));
  }
  std::vector<NamedArray> views() {
    std::vector<NamedArray> out;
    for (std::size_t i = 0; i < names.size(); ++i) out.push_back(NamedArray{names[i], values[i]});
    return out;
  }
  // Same names and sizes, contents set to a value no saved array holds.
  Arrays blank() const {
    Arrays copy = *this;
    for (auto& v : copy.values) std::fill(v.begin(), v.end(), -12345.0f);
    return copy;
  }
};

// Random bit patterns, including NaNs with payloads and denormals: a bit-exact round trip must
// keep every one of them.
std::vector<float> random_bits(std::size_t n, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<float> out(n);
  for (float& x : out) {
    const std::uint32_t bits = rng();
    std::memcpy(&x, &bits, 4);
  }
  return out;
}

Arrays sample_arrays() {
  Arrays arrays;
  arrays.add("master/wte", random_bits(1000, 1));
  arrays.add("master/ln.bias", random_bits(3, 2));
  arrays.add("adam_m/empty", {});
  arrays.add("adam_v/wte", random_bits(48, 3));  // 192 bytes: the file ends with this array's last byte
  return arrays;
}

CheckpointMeta sample_meta(std::int64_t step) {
  CheckpointMeta meta;
  meta.step = step;
  meta.fingerprint = "gpt2-124M/bf16/seed=7";
  meta.extra = {{"loss_scaler", {{"scale", 1024.0}, {"clean_steps", 3}}},
                {"optimizer_step", step},
                {"data_cursor", 123456789012LL}};
  return meta;
}

bool bits_equal(const Arrays& a, const Arrays& b) {
  if (a.values.size() != b.values.size()) return false;
  for (std::size_t i = 0; i < a.values.size(); ++i) {
    if (a.values[i].size() != b.values[i].size()) return false;
    if (!a.values[i].empty() && std::memcmp(a.values[i].data(), b.values[i].data(), a.values[i].size() * 4) != 0) {
      return false;
    }
  }
  return true;
}

std::vector<std::string> files_in(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir)) names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

void write_u32(const fs::path& path, std::uint64_t offset, std::uint32_t value) {
  std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
  file.seekp(static_cast<std::streamoff>(offset));
  file.write(reinterpret_cast<const char*>(&value), 4);
}

TEST_CASE("checkpoint round trip: arrays bit-exact, meta and extra intact, file named by step") {
  TempDir tmp;
  const fs::path dir = fs::path(tmp.path()) / "ckpt" / "run1";  // created on demand, two levels
  Arrays saved = sample_arrays();
  const auto views = saved.views();
  REQUIRE(save_checkpoint(dir, sample_meta(7), views, 3).is_ok());
  CHECK(files_in(dir) == std::vector<std::string>{"step-00000007.zckpt"});
  CHECK(checkpoint_path(dir, 7) == dir / "step-00000007.zckpt");

  auto latest = latest_checkpoint(dir);
  REQUIRE(latest.is_ok());
  REQUIRE(latest->has_value());
  CHECK(**latest == dir / "step-00000007.zckpt");

  Arrays loaded = saved.blank();
  // Loading matches by name, so the order of `into` does not matter.
  auto into = loaded.views();
  std::reverse(into.begin(), into.end());
  auto meta = load_checkpoint(**latest, into);
  REQUIRE(meta.is_ok());
  CHECK(bits_equal(saved, loaded));
  CHECK(meta->step == 7);
  CHECK(meta->fingerprint == "gpt2-124M/bf16/seed=7");
  CHECK(meta->extra == sample_meta(7).extra);
  CHECK(meta->extra["data_cursor"].get<std::int64_t>() == 123456789012LL);
  // Layout: 64-byte aligned data, so the file size is a multiple of 64.
  CHECK(fs::file_size(**latest) % 64 == 0);
}

TEST_CASE("a flipped byte in an array or in the header is caught by its CRC-32C, naming the file and array") {
  TempDir tmp;
  Arrays saved = sample_arrays();
  REQUIRE(save_checkpoint(tmp.path(), sample_meta(1), saved.views(), 0).is_ok());
  const fs::path file = checkpoint_path(tmp.path(), 1);
  Arrays loaded = saved.blank();

  SECTION("data byte") {
    flip_byte(file, fs::file_size(file) - 1);  // the last byte of adam_v/wte
    auto meta = load_checkpoint(file, loaded.views());
    REQUIRE_FALSE(meta.is_ok());
    INFO(meta.status().message());
    CHECK(meta.status().code() == ErrorCode::kIoError);
    CHECK(meta.status().message().find(file.string()) != std::string::npos);
    CHECK(meta.status().message().find("array 'adam_v/wte' failed its CRC-32C check") != std::string::npos);
  }
  SECTION("header byte") {
    flip_byte(file, 40);  // inside the JSON header
    auto meta = load_checkpoint(file, loaded.views());
    REQUIRE_FALSE(meta.is_ok());
    INFO(meta.status().message());
    CHECK(meta.status().message().find("the header failed its CRC-32C check") != std::string::npos);
  }
}

// Issue 15 (found by the checkpoint fuzz target): a header that passes its CRC but was crafted —
// a float or negative step, a float size — was read with nlohmann's get<int64_t>(), undefined for
// 1e300, and a negative step was resumed from. Both are now "the header is malformed/corrupt".
TEST_CASE("a crafted header with a valid CRC is refused, never converted") {
  TempDir tmp;
  Arrays saved = sample_arrays();
  REQUIRE(save_checkpoint(tmp.path(), sample_meta(222), saved.views(), 0).is_ok());
  const fs::path file = checkpoint_path(tmp.path(), 222);
  Arrays loaded = saved.blank();
  // Replaces `from` by `to` (same length) in the JSON header and re-signs it.
  const auto craft = [&](const std::string& from, const std::string& to) {
    REQUIRE(from.size() == to.size());
    std::string bytes;
    {
      std::ifstream in(file, std::ios::binary);
      bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    }
    std::uint64_t header_bytes = 0;
    std::memcpy(&header_bytes, bytes.data() + 16, 8);
    const std::size_t at = bytes.find(from, 24);
    REQUIRE(at != std::string::npos);
    REQUIRE(at + from.size() <= 24 + header_bytes);
    bytes.replace(at, from.size(), to);
    const std::uint32_t crc = io::crc32c(std::as_bytes(std::span<const char>(bytes.data() + 24, header_bytes)));
    std::memcpy(bytes.data() + 12, &crc, 4);
    const fs::path crafted = fs::path(tmp.path()) / "crafted.zckpt";
    std::ofstream(crafted, std::ios::binary | std::ios::trunc)
        .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    auto meta = load_checkpoint(crafted, loaded.views());
    REQUIRE_FALSE(meta.is_ok());
    return meta.status().message();
  };
  CHECK(craft(R"("step":222)", R"("step":1e9)").find("the header is malformed: 'step' is not an integer") !=
        std::string::npos);
  CHECK(craft(R"("step":222)", R"("step":-22)").find("the header records step -22; the file is corrupt") !=
        std::string::npos);
  // A float where the file size goes, written with as many characters as the real size.
  const std::string size_digits = std::to_string(fs::file_size(file));
  CHECK(craft("\"file_bytes\":" + size_digits, "\"file_bytes\":1e" + std::string(size_digits.size() - 2, '9'))
            .find("the header is malformed: 'file_bytes' is not a non-negative integer") != std::string::npos);
}

TEST_CASE("truncated files, foreign files and unknown versions are refused") {
  TempDir tmp;
  Arrays saved = sample_arrays();
  REQUIRE(save_checkpoint(tmp.path(), sample_meta(2), saved.views(), 0).is_ok());
  const fs::path file = checkpoint_path(tmp.path(), 2);
  Arrays loaded = saved.blank();
  auto error_of = [&](const fs::path& path) {
    auto meta = load_checkpoint(path, loaded.views());
    REQUIRE_FALSE(meta.is_ok());
    INFO(meta.status().message());
    CHECK(meta.status().message().find(path.string()) != std::string::npos);
    return meta.status().message();
  };
  SECTION("cut inside the data") {
    fs::resize_file(file, fs::file_size(file) - 100);
    CHECK(error_of(file).find("truncated") != std::string::npos);
  }
  SECTION("cut inside the header") {
    fs::resize_file(file, 30);
    CHECK(error_of(file).find("truncated") != std::string::npos);
  }
  SECTION("cut inside the prefix") {
    fs::resize_file(file, 10);
    CHECK(error_of(file).find("truncated") != std::string::npos);
  }
  SECTION("not a checkpoint") {
    const fs::path other = tmp.write("step-00000003.zckpt", std::string(4096, 'x'));
    CHECK(error_of(other).find("not a zinf checkpoint") != std::string::npos);
  }
  SECTION("a newer format version") {
    write_u32(file, 8, 2);
    CHECK(error_of(file).find("format version 2 is not supported; this build reads version 1") != std::string::npos);
  }
  SECTION("missing file") {
    auto meta = load_checkpoint(fs::path(tmp.path()) / "step-00000099.zckpt", loaded.views());
    REQUIRE_FALSE(meta.is_ok());
    CHECK(meta.status().code() == ErrorCode::kNotFound);
  }
}

TEST_CASE("loading into arrays of another model names the array that does not match") {
  TempDir tmp;
  Arrays saved = sample_arrays();
  REQUIRE(save_checkpoint(tmp.path(), sample_meta(4), saved.views(), 0).is_ok());
  const fs::path file = checkpoint_path(tmp.path(), 4);
  auto error_of = [&](Arrays into) {
    auto meta = load_checkpoint(file, into.views());
    REQUIRE_FALSE(meta.is_ok());
    CHECK(meta.status().code() == ErrorCode::kInvalidArgument);
    return meta.status().message();
  };
  Arrays renamed = saved.blank();
  renamed.names[1] = "master/ln.weight";
  CHECK(error_of(renamed).find("has no array 'master/ln.weight'") != std::string::npos);
  Arrays resized = saved.blank();
  resized.values[0].resize(999);
  CHECK(error_of(resized).find("array 'master/wte' holds 1000 elements, but this run's has 999") != std::string::npos);
  Arrays fewer = saved.blank();
  fewer.names.pop_back();
  fewer.values.pop_back();
  CHECK(error_of(fewer).find("holds array 'adam_v/wte' that this run does not have") != std::string::npos);
}

TEST_CASE("keep_last prunes the oldest checkpoints and leftovers of interrupted saves") {
  TempDir tmp;
  Arrays saved = sample_arrays();
  const auto views = saved.views();
  tmp.write("step-00000002.zckpt.tmp", "left by a crash");  // an interrupted save of step 2
  tmp.write("notes.txt", "not ours");
  for (std::int64_t step = 1; step <= 5; ++step)
    REQUIRE(save_checkpoint(tmp.path(), sample_meta(step), views, 2).is_ok());
  CHECK(files_in(tmp.path()) == std::vector<std::string>{"notes.txt", "step-00000004.zckpt", "step-00000005.zckpt"});
  REQUIRE(save_checkpoint(tmp.path(), sample_meta(6), views, 0).is_ok());  // 0 keeps all
  CHECK(files_in(tmp.path()).size() == 4);
  CHECK(save_checkpoint(tmp.path(), sample_meta(7), views, -1).code() == ErrorCode::kInvalidArgument);
}

TEST_CASE("latest_checkpoint: none for a missing or empty directory, highest step otherwise, .tmp ignored") {
  TempDir tmp;
  auto missing = latest_checkpoint(fs::path(tmp.path()) / "nope");
  REQUIRE(missing.is_ok());
  CHECK_FALSE(missing->has_value());
  auto empty = latest_checkpoint(tmp.path());
  REQUIRE(empty.is_ok());
  CHECK_FALSE(empty->has_value());
  tmp.write("step-00000009.zckpt", "");
  tmp.write("step-123456789.zckpt", "");  // more than eight digits
  tmp.write("step-999999999.zckpt.tmp", "");
  tmp.write("step-12x.zckpt", "");
  auto latest = latest_checkpoint(tmp.path());
  REQUIRE(latest.is_ok());
  REQUIRE(latest->has_value());
  CHECK((*latest)->filename() == "step-123456789.zckpt");
}

TEST_CASE("a target that cannot be created fails naming the path, with no .tmp left behind") {
  TempDir tmp;
  const std::string blocker = tmp.write("a-file", "a regular file, not a directory");
  Arrays saved = sample_arrays();
  const fs::path dir = fs::path(blocker) / "sub";  // fails even for root: the parent is a file
  Status status = save_checkpoint(dir, sample_meta(1), saved.views(), 0);
  REQUIRE_FALSE(status.is_ok());
  INFO(status.message());
  CHECK(status.code() == ErrorCode::kIoError);
  CHECK(status.message().find(dir.string()) != std::string::npos);
  CHECK(status.message().find("ENOTDIR") != std::string::npos);
  CHECK(files_in(tmp.path()) == std::vector<std::string>{"a-file"});
  // A file where the directory should be.
  Status on_file = save_checkpoint(blocker, sample_meta(1), saved.views(), 0);
  REQUIRE_FALSE(on_file.is_ok());
  CHECK(on_file.code() == ErrorCode::kIoError);
  CHECK(files_in(tmp.path()) == std::vector<std::string>{"a-file"});
}

// Lowers the file-size limit for the scope, so writes past it fail with EFBIG as on a full disk.
class FileSizeLimit {
 public:
  explicit FileSizeLimit(rlim_t bytes) {
    REQUIRE(::getrlimit(RLIMIT_FSIZE, &saved_) == 0);
    previous_handler_ = std::signal(SIGXFSZ, SIG_IGN);  // get EFBIG instead of being killed
    rlimit lowered = saved_;
    lowered.rlim_cur = bytes;
    REQUIRE(::setrlimit(RLIMIT_FSIZE, &lowered) == 0);
  }
  ~FileSizeLimit() {
    ::setrlimit(RLIMIT_FSIZE, &saved_);
    std::signal(SIGXFSZ, previous_handler_);
  }
  FileSizeLimit(const FileSizeLimit&) = delete;
  FileSizeLimit& operator=(const FileSizeLimit&) = delete;

 private:
  rlimit saved_{};
  void (*previous_handler_)(int) = nullptr;
};

TEST_CASE("a save that runs out of space fails, removes its .tmp and leaves the earlier checkpoint loadable") {
  TempDir tmp;
  Arrays first = sample_arrays();
  REQUIRE(save_checkpoint(tmp.path(), sample_meta(1), first.views(), 2).is_ok());
  REQUIRE(fs::file_size(checkpoint_path(tmp.path(), 1)) < 16384);

  Arrays big;
  big.add("master/wte", random_bits(1000, 1));
  big.add("master/ln.bias", random_bits(3, 2));
  big.add("adam_m/empty", {});
  big.add("adam_v/wte", random_bits(64 * 1024, 9));              // 256 KiB: past the limit
  const std::int64_t step = GENERATE(as<std::int64_t>{}, 2, 1);  // a new step, and overwriting step 1
  INFO("saving step " << step);
  Status status;
  {
    FileSizeLimit limit(16384);
    status = save_checkpoint(tmp.path(), sample_meta(step), big.views(), 2);
  }
  REQUIRE_FALSE(status.is_ok());
  INFO(status.message());
  CHECK(status.code() == ErrorCode::kIoError);
  fs::path tmp_file = checkpoint_path(tmp.path(), step);
  tmp_file += ".tmp";
  CHECK(status.message().find(tmp_file.string()) != std::string::npos);
  CHECK(status.message().find("EFBIG") != std::string::npos);
  CHECK(files_in(tmp.path()) == std::vector<std::string>{"step-00000001.zckpt"});

  auto latest = latest_checkpoint(tmp.path());
  REQUIRE(latest.is_ok());
  REQUIRE(latest->has_value());
  CHECK(**latest == checkpoint_path(tmp.path(), 1));
  Arrays loaded = first.blank();
  auto meta = load_checkpoint(**latest, loaded.views());
  REQUIRE(meta.is_ok());
  CHECK(meta->step == 1);
  CHECK(bits_equal(first, loaded));
}

TEST_CASE("bad save arguments are refused before anything is written") {
  TempDir tmp;
  Arrays twice;
  twice.add("a", {1.0f});
  twice.add("a", {2.0f});
  Status duplicate = save_checkpoint(tmp.path(), sample_meta(1), twice.views(), 0);
  CHECK(duplicate.code() == ErrorCode::kInvalidArgument);
  CHECK(duplicate.message().find("'a' appears twice") != std::string::npos);
  Arrays ok = sample_arrays();
  CHECK(save_checkpoint(tmp.path(), sample_meta(-1), ok.views(), 0).code() == ErrorCode::kInvalidArgument);
  CHECK(files_in(tmp.path()).empty());
}

}  // namespace
}  // namespace zinf::train

namespace zinf::train {
namespace {

// Arrays written and read in ranges (a parameter whose optimizer states are split over several
// sub-groups): the same bytes and CRC as a whole write; ranges out of order are refused; a damaged
// array is caught when the range that ends it is read.
TEST_CASE("checkpoint arrays in ranges: back to back from 0, same file as whole writes, CRC checked at the end") {
  TempDir tmp;
  const std::vector<float> wte = random_bits(1008, 1);
  const std::vector<zero::CheckpointArrayInfo> layout = {{"master/wte", 1008}, {"adam_m/wte", 1008}};
  const auto write_ranged = [&](const fs::path& dir) {
    auto writer = CheckpointWriter::create(dir, sample_meta(3), layout);
    REQUIRE(writer.is_ok());
    // Interleaved: master [0, 300), m [0, 300), master [300, 1000), m [300, 1000).
    for (const auto& [begin, end] : {std::pair{0, 300}, std::pair{300, 1008}}) {
      for (std::size_t index : {0, 1}) {
        const std::span<const float> part(wte.data() + begin, static_cast<std::size_t>(end - begin));
        REQUIRE(writer.value()->write(index, static_cast<std::size_t>(begin), part).is_ok());
      }
    }
    REQUIRE(writer.value()->commit(0).is_ok());
  };
  const fs::path ranged = fs::path(tmp.path()) / "ranged";
  const fs::path whole = fs::path(tmp.path()) / "whole";
  write_ranged(ranged);
  {
    auto writer = CheckpointWriter::create(whole, sample_meta(3), layout);
    REQUIRE(writer.is_ok());
    REQUIRE(writer.value()->write(0, wte).is_ok());
    REQUIRE(writer.value()->write(1, wte).is_ok());
    REQUIRE(writer.value()->commit(0).is_ok());
  }
  const auto bytes_of = [](const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    return std::vector<char>(std::istreambuf_iterator<char>(in), {});
  };
  CHECK(bytes_of(checkpoint_path(ranged, 3)) == bytes_of(checkpoint_path(whole, 3)));

  SECTION("read back in ranges") {
    auto reader = CheckpointReader::open(checkpoint_path(ranged, 3), layout);
    REQUIRE(reader.is_ok());
    std::vector<float> got(1008, -1.0f);
    REQUIRE(reader.value()->read(0, 0, std::span<float>(got.data(), 1007)).is_ok());
    REQUIRE(reader.value()->read(0, 1007, std::span<float>(got.data() + 1007, 1)).is_ok());
    CHECK(std::memcmp(got.data(), wte.data(), 4032) == 0);
    // Out of order: a gap, and past the end.
    std::vector<float> part(10);
    const Status gap = reader.value()->read(1, 10, part);
    CHECK(gap.code() == ErrorCode::kInvalidArgument);
    CHECK(gap.message().find("'adam_m/wte'") != std::string::npos);
    CHECK(reader.value()->read(1, 0, std::span<float>(got.data(), 1008)).is_ok());
    CHECK(reader.value()->read(1, 1003, part).code() == ErrorCode::kInvalidArgument);
  }
  SECTION("a damaged array is caught by the range that ends it") {
    flip_byte(checkpoint_path(ranged, 3),
              fs::file_size(checkpoint_path(ranged, 3)) - 1);  // adam_m's last byte (4032 bytes: no padding after it)
    auto reader = CheckpointReader::open(checkpoint_path(ranged, 3), layout);
    REQUIRE(reader.is_ok());
    std::vector<float> got(1008);
    CHECK(reader.value()->read(1, 0, std::span<float>(got.data(), 500)).is_ok());
    const Status last = reader.value()->read(1, 500, std::span<float>(got.data() + 500, 508));
    CHECK(last.code() == ErrorCode::kIoError);
    CHECK(last.message().find("array 'adam_m/wte' failed its CRC-32C check") != std::string::npos);
  }
  SECTION("writes out of order, twice or incomplete are refused") {
    auto writer = CheckpointWriter::create(fs::path(tmp.path()) / "bad", sample_meta(3), layout);
    REQUIRE(writer.is_ok());
    const std::span<const float> first(wte.data(), 100);
    CHECK(writer.value()->write(0, 100, first).code() == ErrorCode::kInvalidArgument);  // a gap before it
    REQUIRE(writer.value()->write(0, 0, first).is_ok());
    // Past the end: 909 elements from element 100 of 1008.
    CHECK(writer.value()->write(0, 100, std::span<const float>(wte.data() + 99, 909)).code() ==
          ErrorCode::kInvalidArgument);
    REQUIRE(writer.value()->write(0, 100, std::span<const float>(wte.data() + 100, 908)).is_ok());
    const Status twice = writer.value()->write(0, 0, first);
    CHECK(twice.code() == ErrorCode::kInvalidArgument);
    CHECK(twice.message().find("written twice") != std::string::npos);
    REQUIRE(writer.value()->write(1, 0, first).is_ok());
    const Result<fs::path> committed = writer.value()->commit(0);  // adam_m has 100 of 1008
    REQUIRE_FALSE(committed.is_ok());
    CHECK(committed.status().message().find("'adam_m/wte' was never written whole (100 of 1008 elements)") !=
          std::string::npos);
  }
}

}  // namespace
}  // namespace zinf::train
