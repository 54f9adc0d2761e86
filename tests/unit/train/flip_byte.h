// flip_byte: damages one byte of a file in place (one bit of it inverted), as a disk or a copy
// might. Shared by the checkpoint tests of both files of checkpoint_test.
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>

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

}  // namespace zinf::testing
