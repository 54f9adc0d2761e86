// TokenFileSource: round trip of a written file, llm.c batch order with wrap-around, resume by
// index, the llm.c header, and every validation error with its message.
#include "libengine/train/token_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include <chrono>
#include <cstdint>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/catch.h"
#include "tests/temp_dir.h"

namespace zinf::train {
namespace {

using zinf::testing::TempDir;

void append_le16(std::string& bytes, std::uint32_t v) {
  bytes.push_back(static_cast<char>(v & 0xFF));
  bytes.push_back(static_cast<char>((v >> 8) & 0xFF));
}
void append_le32(std::string& bytes, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) bytes.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}

std::string write_bytes(const TempDir& dir, const std::string& name, const std::string& bytes) {
  const std::string path = dir.path() + "/" + name;
  std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return path;
}

std::string tokens_bytes(const std::vector<std::uint32_t>& tokens) {
  std::string bytes;
  for (std::uint32_t t : tokens) append_le16(bytes, t);
  return bytes;
}

std::string llmc_header(std::uint32_t version, std::uint32_t count) {
  std::string bytes;
  append_le32(bytes, 20240520);
  append_le32(bytes, version);
  append_le32(bytes, count);
  bytes.resize(1024, '\0');
  return bytes;
}

std::vector<std::uint32_t> iota_tokens(std::uint32_t n, std::uint32_t vocab) {
  std::vector<std::uint32_t> tokens(n);
  for (std::uint32_t i = 0; i < n; ++i) tokens[i] = (i * 7 + 3) % vocab;
  return tokens;
}

TokenFileSource open_ok(const TokenFileSpec& spec) {
  Result<TokenFileSource> src = TokenFileSource::open(spec);
  INFO(src.status().message());
  REQUIRE(src.is_ok());
  return std::move(src).value();
}

std::string open_error(const TokenFileSpec& spec, ErrorCode code) {
  Result<TokenFileSource> src = TokenFileSource::open(spec);
  REQUIRE_FALSE(src.is_ok());
  CHECK(src.status().code() == code);
  return src.status().message();
}

TEST_CASE("TokenFileSource: batches follow llm.c's order and wrap around", "[train][token_file]") {
  TempDir dir;
  // 50 tokens, B = 2, T = 4: windows of 9 tokens start at 0, 8, ..., 40; W = floor(49 / 8) = 6.
  const std::vector<std::uint32_t> tokens = iota_tokens(50, 1000);
  const std::string path = write_bytes(dir, "t.bin", tokens_bytes(tokens));
  TokenFileSource src = open_ok({path, 1000, 2, 4});
  CHECK(src.token_count() == 50);
  CHECK_FALSE(src.has_llmc_header());
  CHECK(src.batches_per_epoch() == 6);
  std::vector<std::int32_t> buf(2 * 5);
  std::vector<std::vector<std::int32_t>> epoch;
  for (std::uint64_t n = 0; n < 6; ++n) {
    REQUIRE(src.next_batch(2, 5, buf.data()).is_ok());
    epoch.push_back(buf);
    for (std::uint64_t r = 0; r < 2; ++r) {
      for (std::uint64_t t = 0; t < 5; ++t) {
        REQUIRE(buf[r * 5 + t] == static_cast<std::int32_t>(tokens[n * 8 + r * 4 + t]));
      }
    }
  }
  // Wrap-around: batch 6 is batch 0 again, batch 7 is batch 1.
  REQUIRE(src.next_batch(2, 5, buf.data()).is_ok());
  CHECK(buf == epoch[0]);
  REQUIRE(src.next_batch(2, 5, buf.data()).is_ok());
  CHECK(buf == epoch[1]);
  CHECK(src.batch_index() == 8);

  // Resume by index on a fresh source.
  TokenFileSource resumed = open_ok({path, 1000, 2, 4});
  resumed.seek(4);
  REQUIRE(resumed.next_batch(2, 5, buf.data()).is_ok());
  CHECK(buf == epoch[4]);
  REQUIRE(resumed.batch_at(13, 2, 5, buf.data()).is_ok());  // 13 mod 6 = 1
  CHECK(buf == epoch[1]);
  CHECK(resumed.batch_index() == 5);
}

TEST_CASE("TokenFileSource: exactly B*T+1 tokens is one batch per epoch", "[train][token_file]") {
  TempDir dir;
  const std::string path = write_bytes(dir, "t.bin", tokens_bytes({0, 1, 2, 3, 65535, 5, 6, 7, 8}));
  TokenFileSource src = open_ok({path, 65536, 2, 4});
  CHECK(src.batches_per_epoch() == 1);
  std::vector<std::int32_t> a(10), b(10);
  REQUIRE(src.next_batch(2, 5, a.data()).is_ok());
  REQUIRE(src.next_batch(2, 5, b.data()).is_ok());
  CHECK(a == b);
  CHECK(a == std::vector<std::int32_t>{0, 1, 2, 3, 65535, 65535, 5, 6, 7, 8});
}

TEST_CASE("TokenFileSource: move keeps the mapping", "[train][token_file]") {
  TempDir dir;
  const std::string path = write_bytes(dir, "t.bin", tokens_bytes(iota_tokens(100, 50)));
  TokenFileSource a = open_ok({path, 50, 1, 10});
  TokenFileSource b = std::move(a);
  std::vector<std::int32_t> buf(11);
  REQUIRE(b.next_batch(1, 11, buf.data()).is_ok());
  CHECK(buf[1] == 10);
  TokenFileSource c = open_ok({path, 50, 1, 10});
  c = std::move(b);
  REQUIRE(c.next_batch(1, 11, buf.data()).is_ok());
  CHECK(buf[0] == (10 * 7 + 3) % 50);
}

TEST_CASE("TokenFileSource: llm.c header", "[train][token_file]") {
  TempDir dir;
  const std::vector<std::uint32_t> tokens = iota_tokens(600, 50257);
  const std::string path = write_bytes(dir, "llmc.bin", llmc_header(1, 600) + tokens_bytes(tokens));
  TokenFileSource src = open_ok({path, 50257, 4, 8});
  CHECK(src.has_llmc_header());
  CHECK(src.token_count() == 600);
  std::vector<std::int32_t> buf(4 * 9);
  REQUIRE(src.batch_at(1, 4, 9, buf.data()).is_ok());
  CHECK(buf[0] == static_cast<std::int32_t>(tokens[32]));
  CHECK(buf[35] == static_cast<std::int32_t>(tokens[32 + 3 * 8 + 8]));

  const std::string v2 = write_bytes(dir, "v2.bin", llmc_header(2, 600) + tokens_bytes(tokens));
  CHECK(open_error({v2, 50257, 4, 8}, ErrorCode::kInvalidArgument) ==
        "data.path: '" + v2 + "' has llm.c header version 2; expected 1 (uint16 tokens)");
  const std::string short_file = write_bytes(dir, "short.bin", llmc_header(1, 601) + tokens_bytes(tokens));
  CHECK(open_error({short_file, 50257, 4, 8}, ErrorCode::kInvalidArgument) ==
        "data.path: '" + short_file +
            "' has an llm.c header declaring 601 tokens (1202 bytes after the 1024-byte header) but 1200 bytes "
            "follow it; the file is truncated or not an llm.c token file");
}

TEST_CASE("TokenFileSource: validation errors", "[train][token_file]") {
  TempDir dir;
  const std::string good = write_bytes(dir, "good.bin", tokens_bytes(iota_tokens(20, 100)));

  SECTION("missing file") {
    const std::string missing = dir.path() + "/missing.bin";
    CHECK(open_error({missing, 100, 1, 4}, ErrorCode::kNotFound) ==
          "data.path: cannot open '" + missing + "': No such file or directory (ENOENT)");
  }
  SECTION("unreadable file") {
    const std::string locked = write_bytes(dir, "locked.bin", tokens_bytes(iota_tokens(20, 100)));
    REQUIRE(::chmod(locked.c_str(), 0) == 0);
    if (::geteuid() == 0) {
      WARN("running as root, which reads files whatever their mode: EACCES not checked");
    } else {
      CHECK(open_error({locked, 100, 1, 4}, ErrorCode::kIoError) ==
            "data.path: cannot open '" + locked + "': Permission denied (EACCES)");
    }
  }
  SECTION("a directory") {
    CHECK(open_error({dir.path(), 100, 1, 4}, ErrorCode::kInvalidArgument) ==
          "data.path: '" + dir.path() + "' is not a regular file");
  }
  SECTION("odd byte size") {
    const std::string odd = write_bytes(dir, "odd.bin", tokens_bytes(iota_tokens(20, 100)) + "x");
    CHECK(open_error({odd, 100, 1, 4}, ErrorCode::kInvalidArgument) ==
          "data.path: '" + odd +
              "' has 41 bytes, an odd count; expected uint16 tokens (2 bytes each, no header, or llm.c's "
              "1024-byte header with magic 20240520)");
  }
  SECTION("too few tokens") {
    CHECK(open_error({good, 100, 4, 5}, ErrorCode::kInvalidArgument) ==
          "data.path: '" + good +
              "' holds 20 tokens; a batch of data.batch 4 x data.seq 5 needs at least 21 (B*T+1); use a larger "
              "file or a smaller batch");
    TokenFileSource ok = open_ok({good, 100, 1, 19});  // exactly B*T+1
    CHECK(ok.batches_per_epoch() == 1);
  }
  SECTION("empty file") {
    const std::string empty = write_bytes(dir, "empty.bin", "");
    CHECK(open_error({empty, 100, 1, 1}, ErrorCode::kInvalidArgument) ==
          "data.path: '" + empty +
              "' holds 0 tokens; a batch of data.batch 1 x data.seq 1 needs at least 2 (B*T+1); use a larger file "
              "or a smaller batch");
  }
  SECTION("token id out of vocabulary names the first bad position") {
    std::vector<std::uint32_t> tokens = iota_tokens(20, 100);
    tokens[13] = 100;
    tokens[17] = 5000;
    const std::string bad = write_bytes(dir, "bad.bin", tokens_bytes(tokens));
    CHECK(open_error({bad, 100, 1, 4}, ErrorCode::kInvalidArgument) ==
          "data.path: '" + bad + "' token 13 (byte offset 26) is 100; expected ids below data.vocab = 100");
  }
  SECTION("bad shape fields") {
    CHECK(open_error({good, 0, 1, 4}, ErrorCode::kInvalidArgument) ==
          "data.vocab: 0 is too small; expected at least 1");
    CHECK(open_error({good, 100, 0, 4}, ErrorCode::kInvalidArgument) ==
          "data.batch: 0 is too small; expected at least 1");
    CHECK(open_error({good, 100, 1, 0}, ErrorCode::kInvalidArgument) ==
          "data.seq: 0 is too small; expected at least 1");
  }
}

// Issue 15, defect 5: `truncate -s 0` on the token file 1.5 s into a run killed the process with
// SIGBUS (the file was mmap'd). A changed file is now an error at the next batch.
TEST_CASE("TokenFileSource: a file changed under a run fails the next batch, never crashes", "[train][token_file]") {
  TempDir dir;
  const std::vector<std::uint32_t> tokens = iota_tokens(50, 100);
  const std::string path = write_bytes(dir, "t.bin", tokens_bytes(tokens));
  std::vector<std::int32_t> buf(2 * 5);
  struct stat original {};
  REQUIRE(::stat(path.c_str(), &original) == 0);

  SECTION("truncated to zero") {
    TokenFileSource src = open_ok({path, 100, 2, 4});
    REQUIRE(src.batch_at(0, 2, 5, buf.data()).is_ok());
    std::filesystem::resize_file(path, 0);
    const Status status = src.batch_at(1, 2, 5, buf.data());
    CHECK(status.code() == ErrorCode::kIoError);
    CHECK(status.message() == "data.path: '" + path +
                                  "' changed during the run (100 bytes when opened, 0 now); a "
                                  "token file must not be modified while training reads it (copy it first, or restart "
                                  "the run to use the new contents)");
    CHECK(src.next_batch(2, 5, buf.data()).code() == ErrorCode::kIoError);
    CHECK(src.batch_index() == 0);  // a failed batch does not move the cursor
  }
  SECTION("rewritten in place with the same size") {
    TokenFileSource src = open_ok({path, 100, 2, 4});
    write_bytes(dir, "t.bin", tokens_bytes(iota_tokens(50, 50)));
    const timespec times[2] = {original.st_atim, timespec{original.st_mtim.tv_sec + 5, 0}};
    REQUIRE(::utimensat(AT_FDCWD, path.c_str(), times, 0) == 0);
    CHECK(src.batch_at(0, 2, 5, buf.data()).message().find("rewritten in place") != std::string::npos);
  }
  SECTION("rewritten with the same size and the old mtime put back: the ctime still shows it") {
    TokenFileSource src = open_ok({path, 100, 2, 4});
    // The kernel stamps ctime from a coarse clock (a few ms): rewrite in a later tick than the open.
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    std::vector<std::uint32_t> bad = tokens;
    bad[3] = 60000;
    write_bytes(dir, "t.bin", tokens_bytes(bad));
    const timespec times[2] = {original.st_atim, original.st_mtim};  // same size, same mtime
    REQUIRE(::utimensat(AT_FDCWD, path.c_str(), times, 0) == 0);
    struct stat now {};
    REQUIRE(::stat(path.c_str(), &now) == 0);
    REQUIRE(now.st_mtim.tv_sec == original.st_mtim.tv_sec);
    REQUIRE(now.st_mtim.tv_nsec == original.st_mtim.tv_nsec);
    CHECK(src.batch_at(0, 2, 5, buf.data()).message().find("rewritten in place") != std::string::npos);
  }
  SECTION("a FIFO is refused at once, not waited on") {
    const std::string fifo = dir.path() + "/fifo";
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    CHECK(open_error({fifo, 100, 1, 4}, ErrorCode::kInvalidArgument) ==
          "data.path: '" + fifo + "' is not a regular file");
  }
}

}  // namespace
}  // namespace zinf::train
