// EvalTokens: the token file `zinf eval` reads, in the formats the ecosystem writes:
//   - llm.c's: a 256 x int32 little-endian header, header[0] the magic, header[1] the version,
//     header[2] the token count, then the tokens: magic 20240520 version 1 (GPT-2) is uint16,
//     magic 20240801 version 7 (Llama 3, vocabularies above 65,535) is uint32;
//   - flat: little-endian uint16 (nanoGPT's train.bin) or uint32 tokens, no header; the width is the
//     caller's (a flat file does not say).
// A file is read as llm.c's when it is at least 1024 bytes long and starts with either magic.
//
// Batching (llm.c's DataLoader, deterministic): batch k is B rows of T+1 consecutive tokens starting
// at token k·B·T (row r: tokens [k·B·T + r·T, k·B·T + r·T + T]); inputs are each row's first T
// tokens, targets its last T (shifted by one). A file of n tokens has floor((n - 1) / (B·T)) batches.
//
// Reads with pread, one batch at a time. Not thread-safe.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "libengine/core/status.h"

namespace zinf::train {

class EvalTokens {
 public:
  // `flat_token_bytes`: 2 or 4, the width of a headerless file. NotFound/IoError name the path;
  // InvalidArgument names it and what is wrong (a bad header, a size that is not whole tokens).
  static Result<std::unique_ptr<EvalTokens>> open(const std::filesystem::path& path, int flat_token_bytes);
  ~EvalTokens();
  EvalTokens(const EvalTokens&) = delete;
  EvalTokens& operator=(const EvalTokens&) = delete;

  std::uint64_t token_count() const { return count_; }
  int token_bytes() const { return width_; }
  // "llm.c v1 (uint16)", "flat uint32" ...
  const std::string& format() const { return format_; }
  // The batches of B rows of T tokens the file holds.
  std::uint64_t batches(std::uint64_t batch, std::uint64_t seq) const;
  // Batch k: inputs and targets [B*T] each. InvalidArgument past the last batch; a token id >=
  // `vocab` is InvalidArgument naming its index in the file; IoError naming the path.
  Status read_batch(std::uint64_t k, std::uint64_t batch, std::uint64_t seq, std::uint32_t vocab,
                    std::vector<std::int32_t>& inputs, std::vector<std::int32_t>& targets);

 private:
  EvalTokens() = default;
  std::filesystem::path path_;
  int fd_ = -1;
  int width_ = 2;
  std::uint64_t data_start_ = 0;
  std::uint64_t count_ = 0;
  std::string format_;
  std::vector<unsigned char> buffer_;
};

}  // namespace zinf::train
