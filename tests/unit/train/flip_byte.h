// flip_byte: damages one byte of a file in place (one bit of it inverted), as a disk or a copy
// might. Shared by the checkpoint tests (checkpoint_test's files, resume_agreement_test).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "tests/catch.h"

namespace zinf::testing {

// Inverts bit 5 of the byte at `offset` of `path` (which must exist and be longer than offset).
inline void flip_byte(const std::filesystem::path& path, std::uint64_t offset) {
  std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
  file.seekg(static_cast<std::streamoff>(offset));
  char byte = 0;
  file.read(&byte, 1);
  byte = static_cast<char>(byte ^ 0x20);
  file.seekp(static_cast<std::streamoff>(offset));
  file.write(&byte, 1);
}

// Flips a bit of the last element of the last non-empty array of a checkpoint file (not the
// padding after it, which no CRC covers and no load reads): damage only the array's CRC can see.
inline void flip_last_array_byte(const std::filesystem::path& path) {
  std::ifstream file(path, std::ios::binary);
  char prefix[24];
  file.read(prefix, sizeof(prefix));
  std::uint64_t header_bytes = 0;
  std::memcpy(&header_bytes, prefix + 16, 8);
  std::string text(header_bytes, '\0');
  file.read(text.data(), static_cast<std::streamsize>(text.size()));
  const nlohmann::json header = nlohmann::json::parse(text);
  const std::uint64_t data_start = (24 + header_bytes + 63) / 64 * 64;
  std::uint64_t at = 0;
  for (const nlohmann::json& array : header.at("arrays")) {
    const auto numel = array.at("numel").get<std::uint64_t>();
    if (numel > 0) at = std::max(at, data_start + array.at("offset").get<std::uint64_t>() + numel * 4 - 2);
  }
  REQUIRE(at > 0);
  file.close();
  flip_byte(path, at);
}

}  // namespace zinf::testing
