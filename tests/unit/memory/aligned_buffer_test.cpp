// AlignedBuffer: alignment and zero fill, empty buffers, move semantics, and clear errors for bad
// alignments and impossible sizes.
#include "libengine/memory/aligned_buffer.h"

#include <cstdint>
#include <utility>

#include "tests/catch.h"

namespace zinf::memory {
namespace {

bool all_zero(std::span<const std::byte> bytes) {
  for (std::byte b : bytes) {
    if (b != std::byte{0}) return false;
  }
  return true;
}

TEST_CASE("aligned buffer: aligned and zeroed") {
  for (const std::size_t alignment :
       {std::size_t{8}, std::size_t{64}, std::size_t{512}, std::size_t{4096}, std::size_t{1} << 21}) {
    for (const std::size_t bytes : {std::size_t{1}, std::size_t{4095}, std::size_t{4096}, std::size_t{1} << 20}) {
      INFO("bytes " << bytes << " alignment " << alignment);
      auto buffer = AlignedBuffer::allocate(bytes, alignment);
      REQUIRE(buffer.is_ok());
      CHECK(buffer->size() == bytes);
      CHECK(buffer->bytes().size() == bytes);
      CHECK(reinterpret_cast<std::uintptr_t>(buffer->data()) % alignment == 0);
      CHECK(all_zero(buffer->bytes()));
      buffer->data()[bytes - 1] = std::byte{7};  // the whole range is writable
    }
  }
}

TEST_CASE("aligned buffer: zero bytes gives an empty buffer") {
  auto buffer = AlignedBuffer::allocate(0, 4096);
  REQUIRE(buffer.is_ok());
  CHECK(buffer->data() == nullptr);
  CHECK(buffer->size() == 0);
  CHECK(buffer->bytes().empty());
  const AlignedBuffer default_constructed;
  CHECK(default_constructed.data() == nullptr);
  CHECK(default_constructed.size() == 0);
}

TEST_CASE("aligned buffer: moves transfer ownership") {
  auto first = AlignedBuffer::allocate(4096, 4096).value();
  std::byte* const memory = first.data();
  memory[0] = std::byte{42};

  AlignedBuffer second(std::move(first));
  CHECK(second.data() == memory);
  CHECK(second.size() == 4096);
  CHECK(first.data() == nullptr);  // NOLINT(bugprone-use-after-move): the moved-from state is the contract
  CHECK(first.size() == 0);

  AlignedBuffer third = AlignedBuffer::allocate(512, 512).value();
  third = std::move(second);  // frees third's old memory (ASan would report a leak otherwise)
  CHECK(third.data() == memory);
  CHECK(third.data()[0] == std::byte{42});
  CHECK(second.data() == nullptr);  // NOLINT(bugprone-use-after-move)

  auto& self = third;
  third = std::move(self);  // self-move keeps the memory
  CHECK(third.data() == memory);
}

TEST_CASE("aligned buffer: bad alignment and impossible sizes are errors") {
  for (const std::size_t alignment : {std::size_t{0}, std::size_t{3}, std::size_t{4}, std::size_t{100}}) {
    INFO("alignment " << alignment);
    const auto buffer = AlignedBuffer::allocate(64, alignment);
    REQUIRE_FALSE(buffer.is_ok());
    CHECK(buffer.status().code() == ErrorCode::kInvalidArgument);
    CHECK_THAT(buffer.status().message(), Catch::Contains(std::to_string(alignment)));
  }

  const std::size_t huge = SIZE_MAX - 4095;
  const auto buffer = AlignedBuffer::allocate(huge, 4096);
  REQUIRE_FALSE(buffer.is_ok());
  CHECK(buffer.status().code() == ErrorCode::kOutOfMemory);
  CHECK_THAT(buffer.status().message(), Catch::Contains(std::to_string(huge) + " bytes"));
  CHECK_THAT(buffer.status().message(), Catch::Contains("aligned to 4096 bytes"));
  // Issue 24: train blamed "device_memory: unbounded" for memory the system refused. The refusal
  // says so and names the machine's limit, and callers can tell it from a budget's OutOfMemory.
  CHECK(buffer.status().message().rfind("host memory: the system refused ", 0) == 0);
  CHECK_THAT(buffer.status().message(), Catch::Contains("the limit is this machine's memory ("));
  CHECK(refused_by_system(buffer.status()));
  CHECK_FALSE(refused_by_system(Status::out_of_memory("out of memory on the device tier: 1 B for x does not fit")));
}

}  // namespace
}  // namespace zinf::memory
