// Input files: reading a small file a user names (a scenario, a hardware profile, an HF config)
// without trusting it to be one. Not for data files (token files, checkpoints): those are large and
// read in pieces by their own code.
//
// A path that names a directory, a FIFO, a device (/dev/zero, /dev/urandom) or a socket is refused
// before a byte is read, and so is a regular file larger than the limit; a file that grows past the
// limit while it is read (or a /proc file that reports size 0) is cut off at limit + 1 bytes and
// refused too. So neither memory nor time depend on what the path turns out to be. The open is
// non-blocking, so a FIFO without a writer cannot hang the caller.
#pragma once

#include <cstdint>
#include <string>

#include "libengine/core/status.h"

namespace zinf {

// 16 MiB: a thousand times the largest scenario, profile or Hugging Face config.json in use.
inline constexpr std::uint64_t kMaxInputFileBytes = std::uint64_t{16} << 20;

// The whole contents of `path`. Errors start with the path:
//   NotFound        "<path>: no such file"
//   InvalidArgument "<path>: is a directory; expected a file" / "is a FIFO, not a regular file" /
//                   "is 20.0 MiB; input files are limited to 16.0 MiB" /
//                   "cannot open: Permission denied (EACCES)" (any refusal about the path itself)
//   IoError         the system failing: EIO, out of descriptors or memory, read errors
// Thread-safe; holds no state.
Result<std::string> read_input_file(const std::string& path, std::uint64_t max_bytes = kMaxInputFileBytes);

}  // namespace zinf
