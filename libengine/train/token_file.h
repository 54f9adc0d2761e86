// TokenFileSource: training tokens from a pre-tokenised file, read with pread(2) batch by batch.
//
// Format: a flat array of little-endian uint16 token ids with no header (nanoGPT's train.bin), or
// llm.c's format: a 256 x int32 little-endian header (header[0] = magic 20240520, header[1] =
// version 1, header[2] = token count) followed by exactly that many uint16 tokens. A file is read as
// llm.c's format when it is at least 1024 bytes long and its first int32 is the magic; a headerless
// file would need tokens 55256 and 308 in its first two places to be mistaken for one.
//
// Validation happens up front in open(): missing/unreadable file (errno text), not a regular file,
// odd payload size, a bad llm.c header, fewer than B*T+1 tokens, and any token id >= vocab (the error
// names the first bad token's index and byte offset). The scan reads the whole file once.
//
// A file changed under a run: the file is not mapped (a mapping of a file that shrinks turns the
// next read into SIGBUS), and every batch checks that the file's size and modification time are
// still those open() saw, re-checks the ids it read, and treats a short read as an error. So a
// truncated, rewritten or grown file makes the next batch fail with IoError naming the path,
// never a crash and never an out-of-range token id.
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

  // Opens and validates the file. NotFound/IoError name the path and the errno text;
  // InvalidArgument names the field (data.path, data.vocab, data.batch, data.seq), the value and what
  // is allowed. On error nothing stays open.
  static Result<TokenFileSource> open(const TokenFileSpec& spec);

  TokenFileSource(TokenFileSource&& other) noexcept;
  TokenFileSource& operator=(TokenFileSource&& other) noexcept;
  TokenFileSource(const TokenFileSource&) = delete;
  TokenFileSource& operator=(const TokenFileSource&) = delete;
  ~TokenFileSource();  // closes the file

  const TokenFileSpec& spec() const { return spec_; }
  std::uint64_t token_count() const { return token_count_; }
  bool has_llmc_header() const { return has_header_; }
  // W: batches before the stream repeats, for the spec's B and T.
  std::uint64_t batches_per_epoch() const;

  // Fills out[batch * seq_plus_one] (row-major [B, T+1]) with batch number batch_index() and advances
  // the cursor. Inputs are out[:, :T], targets out[:, 1:]. Preconditions (ZINF_CHECK): batch >= 1,
  // seq_plus_one >= 2 and batch * (seq_plus_one - 1) + 1 <= token_count() (open() checked this for the
  // spec's B and T; other shapes are allowed when they fit). IoError naming data.path when the file
  // changed since open() (see the head comment) or cannot be read; `out` is then unspecified and
  // the cursor does not move.
  Status next_batch(std::uint64_t batch, std::uint64_t seq_plus_one, std::int32_t* out);
  // The index-th batch of a fresh source; does not move the cursor. Errors as next_batch's.
  Status batch_at(std::uint64_t index, std::uint64_t batch, std::uint64_t seq_plus_one, std::int32_t* out) const;
  void seek(std::uint64_t index) { next_index_ = index; }
  std::uint64_t batch_index() const { return next_index_; }

 private:
  TokenFileSource() = default;
  // Reads tokens [first, first + count) into out[count] after checking that the file is unchanged.
  Status read_tokens(std::uint64_t first, std::uint64_t count, std::int32_t* out) const;

  TokenFileSpec spec_;
  int fd_ = -1;
  std::uint64_t payload_offset_ = 0;  // first token's byte (after the header, if any)
  std::uint64_t file_bytes_ = 0;      // size when opened
  std::int64_t change_ns_ = 0;        // status-change time (ctime) when opened
  std::uint64_t token_count_ = 0;
  bool has_header_ = false;
  std::uint64_t next_index_ = 0;
};

}  // namespace zinf::train
