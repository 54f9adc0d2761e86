#include "libengine/core/units.h"

#include <string>

#include "tests/catch.h"

namespace zinf {
namespace {

std::uint64_t count(const char* text) { return parse_count(text, "--params").value(); }
std::uint64_t bytes(const char* text) { return parse_bytes(text, "--cpu-mem").value(); }
double bandwidth(const char* text) { return parse_bandwidth(text, "--nvme-read").value(); }

std::string count_error(const char* text) { return parse_count(text, "--params").status().message(); }
std::string bytes_error(const char* text) { return parse_bytes(text, "--cpu-mem").status().message(); }

TEST_CASE("counts: suffixes and scientific notation") {
  CHECK(count("1T") == 1'000'000'000'000ULL);
  CHECK(count("175B") == 175'000'000'000ULL);
  CHECK(count("1.3e12") == 1'300'000'000'000ULL);
  CHECK(count("7M") == 7'000'000ULL);
  CHECK(count("12k") == 12'000ULL);
  CHECK(count("950") == 950ULL);
  CHECK(count("1.1T") == 1'100'000'000'000ULL);  // decimal fraction, binary-inexact
  CHECK(count(" 2 B ") == 2'000'000'000ULL);
  CHECK(count("100T") == 100'000'000'000'000ULL);
}

TEST_CASE("bytes: SI and IEC units") {
  CHECK(bytes("80GiB") == 80ULL << 30);
  CHECK(bytes("1.5TB") == 1'500'000'000'000ULL);
  CHECK(bytes("512") == 512ULL);
  CHECK(bytes("512B") == 512ULL);
  CHECK(bytes("2KiB") == 2048ULL);
  CHECK(bytes("1kB") == 1000ULL);
  CHECK(bytes("28TB") == 28'000'000'000'000ULL);
  CHECK(bytes("1PiB") == 1ULL << 50);
}

TEST_CASE("bandwidth: bytes and bits per second") {
  CHECK(bandwidth("12GB/s") == 12e9);
  CHECK(bandwidth("25GiB/s") == 25.0 * (1ULL << 30));
  CHECK(bandwidth("100Gb/s") == 12.5e9);
  CHECK(bandwidth("100Gbps") == 12.5e9);
  CHECK(bandwidth("400Gbit/s") == 50e9);
  CHECK(bandwidth("3e9") == 3e9);
  CHECK(bandwidth("1.5 TB/s") == 1.5e12);
}

TEST_CASE("flops") {
  CHECK(parse_flops("989TFLOPS", "f").value() == 989e12);
  CHECK(parse_flops("70 TFLOP/s", "f").value() == 70e12);
  CHECK(parse_flops("312T", "f").value() == 312e12);
  CHECK(parse_flops("1.2e15", "f").value() == 1.2e15);
  CHECK(parse_flops("2PFLOPS", "f").value() == 2e15);
  CHECK_FALSE(parse_flops("12GB/s", "f").is_ok());
}

// Issue 29: "--params 7b" was refused while "7B" worked. Count suffixes have one meaning per letter and
// binary byte units one per spelling, so case does not matter there.
TEST_CASE("count suffixes and byte prefixes read in any case") {
  CHECK(parse_count("7b", "c").value() == 7000000000ULL);
  CHECK(parse_count("1t", "c").value() == 1000000000000ULL);
  CHECK(parse_count("350m", "c").value() == 350000000ULL);
  CHECK(parse_count("2k", "c").value() == 2000ULL);
  CHECK(parse_count("1.5t", "c").value() == 1500000000000ULL);
  CHECK(parse_bytes("64mib", "b").value() == 64ULL << 20);
  CHECK(parse_bytes("64MIB", "b").value() == 64ULL << 20);
  CHECK(parse_bytes("2gib", "b").value() == 2ULL << 30);
  CHECK(parse_bytes("1.5tB", "b").value() == 1500000000000ULL);
  CHECK(parse_bytes("80gB", "b").value() == 80000000000ULL);
}

TEST_CASE("bad sizes name the flag, the value and what is allowed") {
  CHECK(
      count_error("-3") ==
      "--params: '-3' is negative; expected a count like 1000, 7M, 175B, 1T or 1.3e12 (K, M, B=billion, T; any case)");
  CHECK(count_error("").find("--params: '' is empty") == 0);
  CHECK(count_error("0").find("is zero") != std::string::npos);
  CHECK(count_error("1X").find("unknown suffix 'X'") != std::string::npos);
  CHECK(count_error("abc").find("is not a number") != std::string::npos);
  CHECK(count_error("inf").find("is not a number") != std::string::npos);
  CHECK(count_error("nan").find("is not a number") != std::string::npos);
  CHECK(count_error("+5").find("is not a number") != std::string::npos);
  CHECK(count_error("0.5").find("is not a whole number") != std::string::npos);
  CHECK(count_error("1e300").find("too large") != std::string::npos);
  CHECK(count_error("20000000T").find("too large") != std::string::npos);  // 2e19 > 2^64
  CHECK(count_error("1e400").find("out of range") != std::string::npos);
  CHECK(count_error("1TB").find("unknown suffix 'TB'") != std::string::npos);
  CHECK(bytes_error("80G").find("unknown unit 'G'") != std::string::npos);
  // Issue 29: a decimal byte unit's lower-case b would be bits, so "80gb" is refused, naming the unit.
  CHECK(bytes_error("80gb").find("unknown unit 'gb'") != std::string::npos);
  CHECK(bytes_error("80gb").find("a lower-case b means bits") != std::string::npos);
  CHECK(bytes_error("80GiB/s").find("unknown unit") != std::string::npos);
  CHECK(bytes_error("0.5B").find("not a whole number") != std::string::npos);
  CHECK(parse_bytes("0", "--nvme", ZeroIs::kAllowed).value() == 0);
  CHECK(parse_bandwidth("12GB", "--bw").status().message().find("without '/s'") != std::string::npos);
  CHECK_FALSE(parse_bandwidth("0GB/s", "--bw").is_ok());
}

TEST_CASE("positive integers") {
  CHECK(parse_positive_int("16", "--gpus-per-node").value() == 16);
  CHECK(parse_positive_int("0", "--gpus-per-node").status().message().find("is zero") != std::string::npos);
  CHECK(parse_positive_int("2.5", "--nodes").status().message().find("not a whole number") != std::string::npos);
  CHECK(parse_positive_int("99999999999", "--nodes").status().message().find("too large") != std::string::npos);
  CHECK(parse_positive_int("-1", "--nodes").status().message().find("negative") != std::string::npos);
}

TEST_CASE("formatting keeps three significant digits") {
  CHECK(format_count(1e12) == "1.00T");
  CHECK(format_count(175e9) == "175B");
  CHECK(format_count(124439808) == "124M");
  CHECK(format_count(999.9e9) == "1.00T");
  CHECK(format_bytes(80.0 * (1ULL << 30)) == "80.0 GiB");
  CHECK(format_bytes(512) == "512 B");
  CHECK(format_bandwidth(12e9) == "12.0 GB/s");
  CHECK(format_flops(70e12) == "70.0 TFLOP/s");
  CHECK(format_duration(0.85) == "850 ms");
  CHECK(format_duration(12.34) == "12.3 s");
  CHECK(format_duration(270) == "4.50 min");
}

// Issue 15, defect 11: integers went through a double (9007199254740993 became ...992 and
// 2^64 - 1 was refused as over 2^64), and 1e-300 bytes was accepted as 0 where 0 is refused.
TEST_CASE("integer literals are exact in 64 bits, fractions never round to zero") {
  CHECK(parse_count("9007199254740993", "--seed", ZeroIs::kAllowed).value() == 9007199254740993ULL);
  CHECK(parse_count("18446744073709551615", "--seed", ZeroIs::kAllowed).value() == 18446744073709551615ULL);
  CHECK(count_error("18446744073709551616").find("too large") != std::string::npos);
  CHECK(count_error("18446744073709551616").find("2^64") != std::string::npos);
  CHECK(count_error("18446744073709552K").find("too large") != std::string::npos);  // overflows after the suffix
  CHECK(bytes("9007199254740993B") == 9007199254740993ULL);
  CHECK(bytes("16MiB") == 16ULL << 20);
  CHECK(bytes_error("1e-300").find("is not a whole number") != std::string::npos);
  CHECK(bytes_error("1e-300GiB").find("is not a whole number") != std::string::npos);
  CHECK(count_error("0.0000000001").find("is not a whole number") != std::string::npos);
  CHECK(parse_bytes("0", "--nvme", ZeroIs::kAllowed).value() == 0);
  CHECK(parse_bytes("0.0", "--nvme", ZeroIs::kAllowed).value() == 0);
}

// Issue 15, defects 7 and 11: --steps 0x10 ran 16 steps; 2^64 became 2^63 - 1.
TEST_CASE("whole numbers in a range: plain decimal only") {
  CHECK(parse_int_in_range("16", "--steps", 1, 1000).value() == 16);
  CHECK(parse_int_in_range("0", "--threads", 0, 4096).value() == 0);
  CHECK(parse_int_in_range("010", "--steps", 1, 1000).value() == 10);  // decimal, not octal
  for (const char* bad : {"0x10", "1e3", "16.0", "+16", "16 x", "", "0b1", "\t"}) {
    INFO(bad);
    CHECK_FALSE(parse_int_in_range(bad, "--steps", 1, 1000).is_ok());
  }
  CHECK(parse_int_in_range("0x10", "--steps", 1, 1000).status().message() ==
        "--steps: '0x10' is not a whole number; expected a whole number from 1 to 1000");
  CHECK(parse_int_in_range("18446744073709551616", "--steps", 1, 1000).status().message() ==
        "--steps: '18446744073709551616' is too large; expected a whole number from 1 to 1000");
  CHECK(parse_int_in_range("4097", "--threads", 0, 4096).status().message().find("is too large") != std::string::npos);
  CHECK(parse_int_in_range("-1", "--threads", 0, 4096).status().message().find("is negative") != std::string::npos);
  CHECK(parse_int_in_range("-5", "x", -10, 10).value() == -5);
  CHECK(parse_int_in_range("-11", "x", -10, 10).status().message().find("is too small") != std::string::npos);
}

// Issue 15 (found by the sizes fuzz target): the text was echoed raw, so a newline or an escape
// sequence in a flag broke the one-line error, and a megabyte of text made a megabyte of error.
TEST_CASE("the text in a size error is quoted: control characters escaped, length bounded") {
  CHECK(count_error("M\n\x1b[2J") ==
        "--params: 'M\\x0a\\x1b[2J' is not a number; expected a count like 1000, 7M, "
        "175B, 1T or 1.3e12 (K, M, B=billion, T; any case)");
  const std::string long_text = "1" + std::string(100000, 'X');
  const std::string message = parse_count(long_text, "--params").status().message();
  CHECK(message.size() < 300);
  CHECK(message.find("has an unknown suffix 'XXXX") != std::string::npos);
  CHECK(message.find("...'") != std::string::npos);
}

}  // namespace
}  // namespace zinf
