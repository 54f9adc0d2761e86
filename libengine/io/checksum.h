// Checksums for swapped extents: CRC-32C (Castagnoli), computed when an extent is written and
// verified when it is read back, so a torn or corrupted extent is reported instead of trained on.
// Uses the SSE4.2 crc32 instruction (three interleaved streams) when the CPU has it, chosen at run
// time, and a table-driven fallback otherwise. Stateless and thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "libengine/core/status.h"

namespace zinf::io {

enum class ChecksumKind { kNone, kCrc32c };

// "none" / "crc32c"; anything else is InvalidArgument naming `field` and the allowed values.
Result<ChecksumKind> checksum_kind_from_name(std::string_view name, std::string_view field);
std::string_view checksum_kind_name(ChecksumKind kind);

// CRC-32C of `data`, continuing from `crc` (0 to start). crc32c("123456789") == 0xE3069283.
std::uint32_t crc32c(std::span<const std::byte> data, std::uint32_t crc = 0);

// Which implementation crc32c() dispatches to on this CPU: "sse4.2" or "table".
std::string_view crc32c_implementation();

}  // namespace zinf::io
