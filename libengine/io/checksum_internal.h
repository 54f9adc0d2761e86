// The two CRC-32C implementations behind crc32c() (checksum.h), exposed so tests can check them
// against each other and benchmarks can time each one. Not part of the engine's interface: code
// outside checksum.cpp, its test and its benchmark calls crc32c().
#pragma once

#include <cstdint>
#include <span>

namespace zinf::io::detail {

// Table-driven (slicing-by-8) CRC-32C; runs on any CPU. Same contract as crc32c().
std::uint32_t crc32c_table(std::span<const std::byte> data, std::uint32_t crc = 0);

// True when this CPU has the SSE4.2 crc32 instruction, i.e. crc32c_sse42() may be called.
bool crc32c_sse42_supported();

// CRC-32C with the SSE4.2 crc32 instruction over three interleaved streams. Same contract as
// crc32c(). Precondition: crc32c_sse42_supported() (otherwise it faults with an illegal
// instruction).
std::uint32_t crc32c_sse42(std::span<const std::byte> data, std::uint32_t crc = 0);

}  // namespace zinf::io::detail
