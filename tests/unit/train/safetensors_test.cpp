// The safetensors reader and writers on real files (a TempDir): F32 bit-exact round trips, BF16/F16
// converted with PyTorch's rounding (against kernels/cpu's scalar reference and hand-made bit
// patterns), row ranges, header layout (8-byte length, JSON, 8-byte aligned data), sharding with HF's
// names and index, and every kind of damage refused with one line naming the file and the tensor.
// The python test (tests/cli/safetensors_test.py) checks the same files against the `safetensors`
// package itself.
#include <sys/resource.h>

#include <csignal>
#include <cstring>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "libengine/train/safetensors_reader.h"
#include "libengine/train/safetensors_weights.h"
#include "libengine/train/safetensors_writer.h"
#include "tests/catch.h"
#include "tests/temp_dir.h"

namespace zinf::train {
namespace {

namespace fs = std::filesystem;
using zinf::testing::TempDir;

std::vector<float> random_values(std::size_t n, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> out(n);
  for (float& x : out) x = normal(rng);
  return out;
}

std::uint32_t bits(float x) {
  std::uint32_t b;
  std::memcpy(&b, &x, 4);
  return b;
}

std::string read_all(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

void write_all(const fs::path& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

// A file made by hand: 8-byte length, the header text, then `data`.
std::string raw_file(const std::string& header, const std::string& data) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[static_cast<std::size_t>(i)] = static_cast<char>(header.size() >> (8 * i));
  return out + header + data;
}

std::string error_of(const fs::path& path) {
  auto reader = SafetensorsReader::open(path);
  REQUIRE_FALSE(reader.is_ok());
  return reader.status().message();
}

TEST_CASE("safetensors: f32 tensors round-trip bit for bit, in declaration order, with metadata", "[safetensors]") {
  TempDir dir;
  const fs::path path = fs::path(dir.path()) / "a.safetensors";
  const std::vector<float> w = random_values(6 * 5, 1);
  std::vector<float> b = {1.0f, -0.0f, std::numeric_limits<float>::denorm_min(), 3e38f, -1e-30f};
  std::vector<SafetensorsEntry> entries = {
      {"w", DType::kF32, {6, 5}}, {"b", DType::kF32, {5}}, {"empty", DType::kF32, {0, 3}}};
  auto writer = SafetensorsWriter::create(path, entries, {{"format", "pt"}});
  REQUIRE(writer.is_ok());
  // Appends split anywhere, across tensors.
  REQUIRE(writer.value()->append(std::span(w).subspan(0, 7)).is_ok());
  std::vector<float> rest(w.begin() + 7, w.end());
  rest.insert(rest.end(), b.begin(), b.end());
  REQUIRE(writer.value()->append(rest).is_ok());
  CHECK(writer.value()->next_tensor().empty());
  REQUIRE_FALSE(fs::exists(path));
  REQUIRE(writer.value()->commit().is_ok());
  CHECK_FALSE(fs::exists(fs::path(path.string() + ".tmp")));

  const std::string file = read_all(path);
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(file[static_cast<std::size_t>(i)]);
  CHECK((8 + n) % 8 == 0);
  CHECK(file.size() == 8 + n + (30 + 5) * 4);
  const auto header = nlohmann::json::parse(file.substr(8, n));
  CHECK(header["__metadata__"]["format"] == "pt");
  CHECK(header["w"]["data_offsets"] == nlohmann::json({0, 120}));
  CHECK(header["b"]["data_offsets"] == nlohmann::json({120, 140}));
  CHECK(header["empty"]["shape"] == nlohmann::json({0, 3}));

  auto reader = SafetensorsReader::open(path);
  REQUIRE(reader.is_ok());
  CHECK(reader.value()->metadata().at("format") == "pt");
  const SafetensorsTensor* tw = reader.value()->find("w");
  REQUIRE(tw != nullptr);
  CHECK(tw->shape == std::vector<std::int64_t>{6, 5});
  std::vector<float> got(30);
  REQUIRE(reader.value()->read(*tw, 0, got).is_ok());
  for (std::size_t i = 0; i < got.size(); ++i) CHECK(bits(got[i]) == bits(w[i]));
  std::vector<float> rows(2 * 5);
  REQUIRE(reader.value()->read_rows(*tw, 3, 2, rows).is_ok());
  for (std::size_t i = 0; i < rows.size(); ++i) CHECK(bits(rows[i]) == bits(w[15 + i]));
  std::vector<float> gb(5);
  REQUIRE(reader.value()->read(*reader.value()->find("b"), 0, gb).is_ok());
  for (std::size_t i = 0; i < gb.size(); ++i) CHECK(bits(gb[i]) == bits(b[i]));
  // Past the end: refused, naming the tensor.
  std::vector<float> too_many(4);
  const Status past = reader.value()->read_rows(*tw, 5, 2, too_many);
  CHECK_THAT(past.message(), Catch::Contains("'w'"));
}

TEST_CASE("safetensors: bf16 and f16 are written with round-to-nearest-even and read back exactly", "[safetensors]") {
  TempDir dir;
  const fs::path path = fs::path(dir.path()) / "h.safetensors";
  // 1 + 2^-8 is halfway between bf16 1.0 and 1.0078125: ties to even, 1.0 (0x3F80). 1 + 3·2^-9 rounds
  // up to 0x3F81. In f16, 1 + 2^-11 ties to 1.0 (0x3C00); 65520 overflows to inf (0x7C00).
  const std::vector<float> values = {1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-9f, -2.5f, 1.0f + 0x1p-11f, 65520.0f, -0.0f};
  auto writer = SafetensorsWriter::create(path, {{"b", DType::kBF16, {3}}, {"h", DType::kF16, {3}}});
  REQUIRE(writer.is_ok());
  REQUIRE(writer.value()->append(values).is_ok());
  REQUIRE(writer.value()->commit().is_ok());
  const std::string file = read_all(path);
  const auto u16 = [&](std::size_t at) {
    return static_cast<std::uint16_t>(static_cast<unsigned char>(file[at]) |
                                      (static_cast<unsigned char>(file[at + 1]) << 8));
  };
  const std::size_t data = file.size() - 12;
  CHECK(u16(data + 0) == 0x3F80);
  CHECK(u16(data + 2) == 0x3F81);
  CHECK(u16(data + 4) == 0xC020);
  CHECK(u16(data + 6) == 0x3C00);
  CHECK(u16(data + 8) == 0x7C00);
  CHECK(u16(data + 10) == 0x8000);
  auto reader = SafetensorsReader::open(path);
  REQUIRE(reader.is_ok());
  std::vector<float> b(3), h(3);
  REQUIRE(reader.value()->read(*reader.value()->find("b"), 0, b).is_ok());
  REQUIRE(reader.value()->read(*reader.value()->find("h"), 0, h).is_ok());
  CHECK(b == std::vector<float>{1.0f, 1.0f + 0x1p-7f, -2.5f});
  CHECK(h[0] == 1.0f);
  CHECK(std::isinf(h[1]));
  CHECK(bits(h[2]) == 0x80000000u);
  // A row range from the middle of a 16-bit tensor.
  std::vector<float> one(1);
  REQUIRE(reader.value()->read(*reader.value()->find("b"), 2, one).is_ok());
  CHECK(one[0] == -2.5f);
}

TEST_CASE("safetensors: the sharded writer uses HF's names and index, and SafetensorsWeights reads either",
          "[safetensors]") {
  TempDir dir;
  const std::vector<SafetensorsEntry> entries = {
      {"a", DType::kF32, {4}}, {"b", DType::kF32, {2}}, {"c", DType::kBF16, {8}}, {"d", DType::kF32, {1}}};
  std::vector<float> values(4 + 2 + 8 + 1);
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i) + 0.5f;
  SECTION("above the limit: shards and an index") {
    // At most 20 bytes per shard: {a} (16), {b} (8; with c it would be 24), {c, d} (16 + 4).
    auto writer = ShardedSafetensorsWriter::create(dir.path(), entries, 20);
    REQUIRE(writer.is_ok());
    CHECK(writer.value()->shard_count() == 3);
    for (float v : values) REQUIRE(writer.value()->append(std::span(&v, 1)).is_ok());
    auto files = writer.value()->commit();
    REQUIRE(files.is_ok());
    REQUIRE(files.value().size() == 4);
    CHECK(files.value()[0].filename() == "model-00001-of-00003.safetensors");
    CHECK(files.value()[2].filename() == "model-00003-of-00003.safetensors");
    CHECK(files.value()[3].filename() == "model.safetensors.index.json");
    const auto index = nlohmann::json::parse(read_all(files.value()[3]));
    CHECK(index["metadata"]["total_size"] == 16 + 8 + 16 + 4);
    CHECK(index["weight_map"]["b"] == "model-00002-of-00003.safetensors");
    CHECK(index["weight_map"]["c"] == "model-00003-of-00003.safetensors");
    CHECK(index["weight_map"]["d"] == "model-00003-of-00003.safetensors");
  }
  SECTION("below the limit: one model.safetensors") {
    auto writer = ShardedSafetensorsWriter::create(dir.path(), entries, 1000);
    REQUIRE(writer.is_ok());
    REQUIRE(writer.value()->append(values).is_ok());
    auto files = writer.value()->commit();
    REQUIRE(files.is_ok());
    REQUIRE(files.value().size() == 1);
    CHECK(files.value()[0].filename() == "model.safetensors");
  }
  auto weights = SafetensorsWeights::open(dir.path());
  REQUIRE(weights.is_ok());
  CHECK(weights.value()->names() == std::vector<std::string>{"a", "b", "c", "d"});
  const auto c = weights.value()->find("c");
  REQUIRE(c.reader != nullptr);
  std::vector<float> got(8);
  REQUIRE(c.reader->read(*c.tensor, 0, got).is_ok());
  for (std::size_t i = 0; i < 8; ++i) CHECK(got[i] == values[6 + i]);  // k + 0.5 is exact in bf16 here
  CHECK(weights.value()->find("zz").reader == nullptr);
}

TEST_CASE("safetensors: an index that disagrees with its shards is refused by name", "[safetensors]") {
  TempDir dir;
  auto writer = ShardedSafetensorsWriter::create(dir.path(), {{"a", DType::kF32, {1}}, {"b", DType::kF32, {1}}}, 4);
  REQUIRE(writer.is_ok());
  REQUIRE(writer.value()->append(std::vector<float>{1, 2}).is_ok());
  REQUIRE(writer.value()->commit().is_ok());
  const fs::path index = fs::path(dir.path()) / "model.safetensors.index.json";
  write_all(index,
            R"({"weight_map": {"a": "model-00002-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}})");
  auto weights = SafetensorsWeights::open(dir.path());
  REQUIRE_FALSE(weights.is_ok());
  CHECK_THAT(weights.status().message(), Catch::Contains("'a' is mapped to model-00002-of-00002"));
  fs::remove(index);
  CHECK(SafetensorsWeights::open(dir.path()).status().code() == ErrorCode::kNotFound);
}

TEST_CASE("safetensors: damaged or malformed files are refused with one line naming the file and tensor",
          "[safetensors]") {
  TempDir dir;
  const fs::path path = fs::path(dir.path()) / "bad.safetensors";
  const std::string eight(8, '\0');
  const auto refused = [&](const std::string& bytes, const std::string& expected) {
    write_all(path, bytes);
    const std::string message = error_of(path);
    INFO(message);
    CHECK_THAT(message, Catch::Contains(path.string()));
    CHECK_THAT(message, Catch::Contains(expected));
    CHECK(message.find('\n') == std::string::npos);
  };
  refused("abc", "shorter than the 8-byte header length");
  refused(raw_file(std::string(20, ' '), "").substr(0, 18), "runs past the end of the file");
  {
    std::string huge(8, '\0');
    huge[4] = 1;  // 2^32 bytes
    refused(huge + "{}", "exceeds the format's limit");
  }
  refused(raw_file("[1]", ""), "not a JSON object");
  refused(raw_file("{\"a\": ", ""), "not valid JSON");
  refused(
      raw_file(
          R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}, "a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})",
          eight),
      "names 'a' twice");
  refused(raw_file(R"({"w": {"dtype": "F64", "shape": [1], "data_offsets": [0, 8]}})", eight),
          "tensor 'w': dtype 'F64' is not supported (allowed: F32, BF16, F16)");
  refused(raw_file(R"({"w": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}})", eight),
          "tensor 'w': shape [3] of F32 needs 12 bytes, but data_offsets [0,8] span 8");
  refused(raw_file(R"({"w": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 8]}})", eight),
          "tensor 'w': shape [-1] has a dimension");
  refused(raw_file(R"({"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}})", eight),
          "tensor 'w': data_offsets [0,16] run past the data section (8 bytes");
  refused(raw_file(R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": [8, 0]}})", eight),
          "tensor 'w': data_offsets");
  refused(
      raw_file(
          R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}, "v": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})",
          eight),
      "overlaps tensor");
  refused(raw_file(R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})", eight),
          "bytes 0..4 of the data section belong to no tensor");
  refused(raw_file(R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}})", eight),
          "the data section has 8 bytes but its tensors end at byte 4");
  refused(raw_file(R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8], "x": 1}})", eight),
          "tensor 'w': unknown field 'x'");
  refused(raw_file(R"({"__metadata__": {"k": 1}})", ""), "__metadata__.k is not a string");
  // A good file truncated by a byte: its last tensor now runs past the data section.
  {
    const fs::path good = fs::path(dir.path()) / "good.safetensors";
    auto writer = SafetensorsWriter::create(good, {{"w", DType::kF32, {2}}});
    REQUIRE(writer.value()->append(std::vector<float>{1, 2}).is_ok());
    REQUIRE(writer.value()->commit().is_ok());
    const std::string bytes = read_all(good);
    refused(bytes.substr(0, bytes.size() - 1), "tensor 'w': data_offsets [0,8] run past the data section (7 bytes");
  }
  CHECK(SafetensorsReader::open(fs::path(dir.path()) / "missing").status().code() == ErrorCode::kNotFound);
}

TEST_CASE("safetensors: the writer refuses bad declarations and leaves no file on failure", "[safetensors]") {
  TempDir dir;
  const fs::path path = fs::path(dir.path()) / "w.safetensors";
  CHECK_THAT(SafetensorsWriter::create(path, {{"a", DType::kF32, {1}}, {"a", DType::kF32, {1}}}).status().message(),
             Catch::Contains("tensor 'a': is declared twice"));
  CHECK_THAT(SafetensorsWriter::create(path, {{"a", DType::kF32, {-2}}}).status().message(),
             Catch::Contains("negative dimension"));
  {
    auto writer = SafetensorsWriter::create(path, {{"a", DType::kF32, {2}}, {"b", DType::kF32, {1}}});
    REQUIRE(writer.is_ok());
    REQUIRE(writer.value()->append(std::vector<float>{1, 2}).is_ok());
    const Status early = writer.value()->commit();
    CHECK_THAT(early.message(), Catch::Contains("tensor 'b' is incomplete"));
    CHECK_THAT(writer.value()->append(std::vector<float>{1, 2}).message(),
               Catch::Contains("past the last tensor's end"));
  }
  CHECK_FALSE(fs::exists(path));
  CHECK_FALSE(fs::exists(fs::path(path.string() + ".tmp")));
  // A full disk (RLIMIT_FSIZE stands in for it: tests run as root) is an I/O error naming the path.
  rlimit old{};
  REQUIRE(::getrlimit(RLIMIT_FSIZE, &old) == 0);
  const auto previous = std::signal(SIGXFSZ, SIG_IGN);
  rlimit small = old;
  small.rlim_cur = 4096;
  REQUIRE(::setrlimit(RLIMIT_FSIZE, &small) == 0);
  Status status = Status::ok();
  {
    auto writer = SafetensorsWriter::create(path, {{"a", DType::kF32, {10000}}});
    REQUIRE(writer.is_ok());
    status = writer.value()->append(std::vector<float>(10000, 1.0f));
  }
  ::setrlimit(RLIMIT_FSIZE, &old);
  std::signal(SIGXFSZ, previous);
  CHECK(status.code() == ErrorCode::kIoError);
  CHECK_THAT(status.message(), Catch::Contains(path.string() + ".tmp"));
  CHECK_FALSE(fs::exists(fs::path(path.string() + ".tmp")));
}

}  // namespace
}  // namespace zinf::train
