// Fuzz target: a token file and its header (scenario "data": {"source": "file"}). The first four
// bytes choose vocab (16 bits), batch and seq; the rest is the file. Invariants: no crash; errors
// are one line naming data.*; an accepted file gives batches whose every id is below vocab, for the
// first, last and a wrapped-around index.
#include <vector>

#include "libengine/train/token_file.h"
#include "tests/fuzz/fuzz_target.h"
#include "tests/fuzz/mem_file.h"

using zinf::fuzz::check_one_line;
using zinf::fuzz::fuzz_fail;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 4) return 0;
  zinf::train::TokenFileSpec spec;
  spec.vocab = 1u + (static_cast<std::uint32_t>(data[0]) | (static_cast<std::uint32_t>(data[1]) << 8));
  spec.batch = 1u + data[2] % 8;
  spec.seq = 1u + data[3] % 64;
  const zinf::fuzz::MemFile file(data + 4, size - 4);
  if (!file.ok()) return 0;
  spec.path = file.path();
  auto source = zinf::train::TokenFileSource::open(spec);
  check_one_line(source.status(), size);
  if (!source.is_ok()) {
    if (source.status().message().rfind("data.", 0) != 0)
      fuzz_fail("an error not naming data.*: " + source.status().message(), size);
    return 0;
  }
  std::vector<std::int32_t> rows(spec.batch * (spec.seq + 1));
  const std::uint64_t epoch = source->batches_per_epoch();
  if (epoch == 0) fuzz_fail("an accepted file with no whole batch", size);
  for (const std::uint64_t index : {std::uint64_t{0}, epoch - 1, epoch + 3}) {
    const zinf::Status status = source->batch_at(index, spec.batch, spec.seq + 1, rows.data());
    if (!status.is_ok()) fuzz_fail("an unchanged file failed a batch: " + status.message(), size);
    for (const std::int32_t id : rows) {
      if (id < 0 || static_cast<std::uint32_t>(id) >= spec.vocab) fuzz_fail("a token id outside the vocabulary", size);
    }
  }
  return 0;
}
