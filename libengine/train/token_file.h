// TokenFileSource: training tokens from a pre-tokenised file, read through a read-only mmap.
//
// Format: a flat array of little-endian uint16 token ids with no header (nanoGPT's train.bin), or
// llm.c's format: a 256 x int32 little-endian header (header[0] = magic 20240520, header[1] =
// version 1, header[2] = token count) followed by exactly that many uint16 tokens. A file is read as
// llm.c's format when it is at least 1024 bytes long and its first int32 is the magic; a headerless
// file would need tokens 55256 and 308 in its first two places to be mistaken for one.
//
// Validation happens up front in open(), so next_batch cannot fail: missing/unreadable file (errno
// text), odd payload size, a bad llm.c header, fewer than B*T+1 tokens, and any token id >= vocab
// (the error names the first bad token's index and byte offset). The scan reads the whole file once.
//
// Batches (llm.c's DataLoader order): an epoch is W = floor((N - 1) / (B*T)) windows of B*T+1
// consecutive tokens; batch n is window (n mod W), starting at token (n mod W) * B*T, and row r is
// tokens [start + r*T, start + r*T + T]. Batch W is batch 0 again (wrap-around); the tail of the file
// that does not fill a window is never read. Batch n is a pure function of (file, n, B, T), so
// resuming is seek(n).
//
// Move-only; const methods may be called concurrently, next_batch/seek mutate the cursor.
#pragma once

#include <cstdint>
#include <string>

#include "libengine/core/status.h"

namespace zinf::train {

struct TokenFileSpec {
  std::string path;
  std::uint32_t vocab = 0;  // every token id must be < vocab
  std::uint64_t batch = 0;  // B, rows per batch
  std::uint64_t seq = 0;    // T, tokens of input per row (each row holds T+1 tokens)
};

class TokenFileSource {
 public:
  static constexpr std::int32_t kLlmcMagic = 20240520;
  static constexpr std::uint64_t kLlmcHeaderBytes = 256 * 4;

  // Maps and validates the file. NotFound/IoError name the path and the errno text;
  // InvalidArgument names the field (data.path, data.vocab, data.batch, data.seq), the value and what
  // is allowed. On error nothing stays mapped or open.
  static Result<TokenFileSource> open(const TokenFileSpec& spec);

  TokenFileSource(TokenFileSource&& other) noexcept;
  TokenFileSource& operator=(TokenFileSource&& other) noexcept;
  TokenFileSource(const TokenFileSource&) = delete;
  TokenFileSource& operator=(const TokenFileSource&) = delete;
  ~TokenFileSource();  // unmaps

  const TokenFileSpec& spec() const { return spec_; }
  std::uint64_t token_count() const { return token_count_; }
  bool has_llmc_header() const { return has_header_; }
  // W: batches before the stream repeats, for the spec's B and T.
  std::uint64_t batches_per_epoch() const;

  // Fills out[batch * seq_plus_one] (row-major [B, T+1]) with batch number batch_index() and advances
  // the cursor. Inputs are out[:, :T], targets out[:, 1:]. Preconditions (ZINF_CHECK): batch >= 1,
  // seq_plus_one >= 2 and batch * (seq_plus_one - 1) + 1 <= token_count() (open() checked this for the
  // spec's B and T; other shapes are allowed when they fit).
  void next_batch(std::uint64_t batch, std::uint64_t seq_plus_one, std::int32_t* out);
  // The index-th batch of a fresh source; does not move the cursor.
  void batch_at(std::uint64_t index, std::uint64_t batch, std::uint64_t seq_plus_one, std::int32_t* out) const;
  void seek(std::uint64_t index) { next_index_ = index; }
  std::uint64_t batch_index() const { return next_index_; }

 private:
  TokenFileSource() = default;
  std::int32_t token(std::uint64_t i) const;

  TokenFileSpec spec_;
  void* map_ = nullptr;
  std::uint64_t map_bytes_ = 0;
  const unsigned char* tokens_ = nullptr;  // first token's byte (after the header, if any)
  std::uint64_t token_count_ = 0;
  bool has_header_ = false;
  std::uint64_t next_index_ = 0;
};

}  // namespace zinf::train
