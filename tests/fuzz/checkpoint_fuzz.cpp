// Fuzz target: a checkpoint file (train/checkpoint.h) as load_checkpoint reads it on resume. Byte 0
// picks how much of the file the fuzzer may break without the checksums stopping it: bit 0 recomputes
// the header's CRC-32C (so the JSON header itself is exercised), bit 1 also each array's CRC as the
// header places it. Invariants: no crash, no exception, no sanitizer report (a crafted header used
// to be read with conversions that are undefined for floats); errors are one line naming the file;
// an accepted checkpoint has a non-negative step and filled every array.
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "libengine/io/checksum.h"
#include "libengine/train/checkpoint.h"
#include "tests/fuzz/fuzz_target.h"
#include "tests/fuzz/mem_file.h"

using zinf::fuzz::check_one_line;
using zinf::fuzz::fuzz_fail;

namespace {

constexpr std::size_t kPrefixBytes = 24;

std::uint32_t crc_of(const std::string& bytes, std::size_t offset, std::size_t length) {
  return zinf::io::crc32c(std::as_bytes(std::span<const char>(bytes.data() + offset, length)));
}

// Rewrites the stored CRCs so that corrupt contents reach the parser instead of the checksum test.
void fix_up(std::string& file, bool arrays) {
  if (file.size() < kPrefixBytes) return;
  std::uint64_t header_bytes = 0;
  std::memcpy(&header_bytes, file.data() + 16, 8);
  if (header_bytes > file.size() - kPrefixBytes) return;
  const std::uint32_t header_crc = crc_of(file, kPrefixBytes, header_bytes);
  std::memcpy(file.data() + 12, &header_crc, 4);
  if (!arrays) return;
  const nlohmann::json header = nlohmann::json::parse(
      file.begin() + kPrefixBytes, file.begin() + static_cast<std::ptrdiff_t>(kPrefixBytes + header_bytes), nullptr,
      /*allow_exceptions=*/false);
  if (!header.is_object() || !header.contains("arrays") || !header["arrays"].is_array()) return;
  const std::uint64_t data_start = (kPrefixBytes + header_bytes + 63) / 64 * 64;
  nlohmann::json fixed = header;
  for (nlohmann::json& array : fixed["arrays"]) {
    if (!array.is_object() || !array.contains("offset") || !array.contains("numel")) continue;
    if (!array["offset"].is_number_unsigned() || !array["numel"].is_number_unsigned()) continue;
    const std::uint64_t begin = data_start + array["offset"].get<std::uint64_t>();
    const std::uint64_t length = array["numel"].get<std::uint64_t>() * 4;
    if (begin > file.size() || length > file.size() - begin) continue;
    array["crc32c"] = crc_of(file, begin, length);
  }
  const std::string text = fixed.dump();
  if (text.size() != header_bytes) return;  // same length only: offsets stay valid
  std::memcpy(file.data() + kPrefixBytes, text.data(), text.size());
  const std::uint32_t crc = crc_of(file, kPrefixBytes, header_bytes);
  std::memcpy(file.data() + 12, &crc, 4);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  std::string file(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] & 1) fix_up(file, (data[0] & 2) != 0);
  const zinf::fuzz::MemFile mem(file.data(), file.size());
  if (!mem.ok()) return 0;
  std::vector<float> m(4, -1.0f);
  std::vector<float> v(2, -1.0f);
  const std::vector<zinf::NamedArray> arrays{{"m", m}, {"v", v}};
  const auto meta = zinf::train::load_checkpoint(mem.path(), arrays);
  check_one_line(meta.status(), size);
  if (!meta.is_ok()) {
    if (meta.status().message().find(mem.path()) == std::string::npos)
      fuzz_fail("an error not naming the file: " + meta.status().message(), size);
    return 0;
  }
  if (meta->step < 0) fuzz_fail("an accepted checkpoint with a negative step", size);
  return 0;
}
