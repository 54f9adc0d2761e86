// ExtentAllocator: hands out aligned byte ranges of one swap file and takes them back.
//
// First fit over an offset-ordered free list; freed ranges coalesce with their neighbours, so a
// store that frees and rewrites tensors of the same sizes every step does not fragment. It only
// does arithmetic: it never touches the file. Not thread-safe (SwapStore holds its lock).
#pragma once

#include <cstdint>
#include <map>
#include <optional>

namespace zinf::io {

class ExtentAllocator {
 public:
  // `alignment_bytes` is a power of two; every offset and size handed out is a multiple of it.
  ExtentAllocator(std::uint64_t capacity_bytes, std::uint64_t alignment_bytes);

  // Offset of a free range of round_up(bytes, alignment) bytes, or nullopt when none is large
  // enough. bytes == 0 is allowed and returns a range of 0 bytes at offset 0 without using space.
  std::optional<std::uint64_t> allocate(std::uint64_t bytes);

  // Returns a range obtained from allocate() with the same `bytes`. Freeing a range that is not
  // allocated is a bug (ZINF_CHECK).
  void free(std::uint64_t offset, std::uint64_t bytes);

  // Extends capacity to `new_capacity_bytes` (rounded down to alignment); the new space is free.
  void grow(std::uint64_t new_capacity_bytes);

  std::uint64_t capacity_bytes() const { return capacity_bytes_; }
  std::uint64_t used_bytes() const { return used_bytes_; }
  std::uint64_t largest_free_bytes() const;
  std::uint64_t alignment_bytes() const { return alignment_bytes_; }
  std::uint64_t round_up(std::uint64_t bytes) const;

 private:
  std::uint64_t capacity_bytes_;
  std::uint64_t alignment_bytes_;
  std::uint64_t used_bytes_ = 0;
  std::map<std::uint64_t, std::uint64_t> free_;  // offset -> length, non-adjacent, ordered
};

}  // namespace zinf::io
