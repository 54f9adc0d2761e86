// fuzz_driver: runs a fuzz target without libFuzzer (GCC builds, CI): every file of the corpus
// directories given, then -runs=N inputs made by mutating them, deterministically from -seed=S.
// It takes libFuzzer's flag spelling, so CTest and scripts/fuzz.sh call both builds alike.
//
//   sizes_fuzz [-runs=N] [-seed=S] [-max_len=L] CORPUS_DIR...
//
// Mutations (one to four per input, splitmix64-driven): flip a bit, set a byte, insert or erase a
// run of bytes, duplicate a slice (deep nesting grows this way), splice in part of another corpus
// input, or insert a token that has broken parsers before ("1e400", "-1e999", 400 digits, "[[[[",
// "\u0000", control bytes, "0x10", "18446744073709551616", "1e-300"). Not coverage-guided: it finds
// what the seeds are near; scripts/fuzz.sh runs the libFuzzer build for the long runs.
//
// Exit status 0 when every input ran; a broken invariant aborts inside the target (the input that
// did it is written to ./fuzz-crash-<target> first, for reproducing with the target alone).
#include <algorithm>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <string_view>
#include <vector>

#include "tests/fuzz/fuzz_target.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_UNDEFINED__)
#define ZINF_FUZZ_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(undefined_behavior_sanitizer)
#define ZINF_FUZZ_SANITIZED 1
#endif
#endif
#if defined(ZINF_FUZZ_SANITIZED)
#include <sanitizer/common_interface_defs.h>
#endif

namespace {

std::uint64_t splitmix64(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

const std::vector<std::string>& tokens() {
  static const std::vector<std::string> list = {"1e400",
                                                "-1e999",
                                                std::string(400, '9'),
                                                "[[[[[[[[",
                                                "{\"a\":{\"a\":{\"a\":",
                                                "]]]]",
                                                "\\u0000",
                                                "\\u001b[2J",
                                                std::string("\0", 1),
                                                "\x1b",
                                                "\n",
                                                "0x10",
                                                "18446744073709551616",
                                                "18446744073709551615",
                                                "9007199254740993",
                                                "1e-300",
                                                "-0",
                                                "0",
                                                "nan",
                                                "inf",
                                                "1e308",
                                                "4097",
                                                "65537",
                                                "\"\"",
                                                "null",
                                                "true",
                                                "[]",
                                                "{}",
                                                ",",
                                                ":",
                                                "\"params\"",
                                                "\"steps\"",
                                                "\"threads\"",
                                                "\"model\"",
                                                "\"node\"",
                                                "GiB",
                                                "TB/s",
                                                "TFLOPS",
                                                "..",
                                                ":x",
                                                "=",
                                                "\xff\xfe",
                                                "\xc3\x28"};
  return list;
}

std::string mutate(std::string input, const std::vector<std::string>& corpus, std::uint64_t& rng, std::size_t max_len) {
  const int count = 1 + static_cast<int>(splitmix64(rng) % 4);
  for (int m = 0; m < count; ++m) {
    const std::uint64_t pick = splitmix64(rng);
    const std::size_t at = input.empty() ? 0 : static_cast<std::size_t>(splitmix64(rng) % (input.size() + 1));
    switch (pick % 7) {
      case 0:  // flip a bit
        if (!input.empty()) input[at % input.size()] ^= static_cast<char>(1u << (splitmix64(rng) % 8));
        break;
      case 1:  // set a byte
        if (!input.empty()) input[at % input.size()] = static_cast<char>(splitmix64(rng));
        break;
      case 2: {  // insert random bytes
        const std::size_t n = 1 + splitmix64(rng) % 8;
        std::string bytes;
        for (std::size_t i = 0; i < n; ++i) bytes.push_back(static_cast<char>(splitmix64(rng)));
        input.insert(at, bytes);
        break;
      }
      case 3:  // erase a run
        if (!input.empty()) input.erase(at % input.size(), 1 + splitmix64(rng) % 16);
        break;
      case 4: {  // duplicate a slice in place (grows nesting and repetition)
        if (input.empty()) break;
        const std::size_t from = splitmix64(rng) % input.size();
        const std::size_t n = 1 + splitmix64(rng) % std::min<std::size_t>(64, input.size() - from);
        const std::string slice = input.substr(from, n);
        const std::size_t times = 1 + splitmix64(rng) % 64;
        std::string repeated;
        for (std::size_t i = 0; i < times; ++i) repeated += slice;
        input.insert(at, repeated);
        break;
      }
      case 5: {  // splice from another corpus input
        if (corpus.empty()) break;
        const std::string& other = corpus[splitmix64(rng) % corpus.size()];
        if (other.empty()) break;
        const std::size_t from = splitmix64(rng) % other.size();
        input.insert(at, other.substr(from, 1 + splitmix64(rng) % 256));
        break;
      }
      default: {  // a token that has broken parsers before
        const std::vector<std::string>& list = tokens();
        input.insert(at, list[splitmix64(rng) % list.size()]);
        break;
      }
    }
    if (input.size() > max_len) input.resize(max_len);
  }
  return input;
}

std::string g_target_name = "fuzz";
const std::string* g_current = nullptr;

// Keeps the input that broke an invariant or made a sanitizer report, for reproduction.
void save_current_input() {
  if (g_current == nullptr) return;
  const std::string path = "fuzz-crash-" + g_target_name;
  if (FILE* f = std::fopen(path.c_str(), "wb")) {
    std::fwrite(g_current->data(), 1, g_current->size(), f);
    std::fclose(f);
    std::fprintf(stderr, "fuzz_driver: the input is saved in %s\n", path.c_str());
  }
}

void on_abort(int signal_number) {
  save_current_input();
  std::signal(signal_number, SIG_DFL);
  std::raise(signal_number);
}

std::uint64_t flag_value(std::string_view arg, std::string_view name, std::uint64_t fallback) {
  if (arg.substr(0, name.size()) != name) return fallback;
  return std::strtoull(std::string(arg.substr(name.size())).c_str(), nullptr, 10);
}

}  // namespace

int main(int argc, char** argv) {
  g_target_name = std::filesystem::path(argv[0]).filename().string();
  std::uint64_t runs = 1000;
  std::uint64_t seed = 1;
  std::uint64_t max_len = 4096;
  std::vector<std::string> corpus;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg.starts_with("-runs=")) {
      runs = flag_value(arg, "-runs=", runs);
    } else if (arg.starts_with("-seed=")) {
      seed = flag_value(arg, "-seed=", seed);
    } else if (arg.starts_with("-max_len=")) {
      max_len = flag_value(arg, "-max_len=", max_len);
    } else if (arg.starts_with("-")) {
      std::fprintf(stderr, "fuzz_driver: ignoring %s (a libFuzzer flag this driver does not have)\n", argv[i]);
    } else if (std::filesystem::is_directory(arg)) {
      std::vector<std::filesystem::path> files;
      for (const auto& entry : std::filesystem::directory_iterator(arg)) {
        if (entry.is_regular_file()) files.push_back(entry.path());
      }
      std::sort(files.begin(), files.end());  // a fixed order: the same seed gives the same inputs
      for (const auto& file : files) {
        std::ifstream in(file, std::ios::binary);
        corpus.emplace_back(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
      }
    } else {
      std::ifstream in(std::string(arg), std::ios::binary);
      corpus.emplace_back(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    }
  }
  // fuzz_fail aborts; a sanitizer report ends through its death callback. (A crash without a
  // sanitizer is left to the default handler; rerun with the same -seed under ASan to keep its input.)
  std::signal(SIGABRT, on_abort);
#if defined(ZINF_FUZZ_SANITIZED)
  __sanitizer_set_death_callback(save_current_input);
#endif

  std::uint64_t executed = 0;
  const auto run_one = [&](const std::string& input) {
    g_current = &input;
    LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(input.data()), input.size());
    g_current = nullptr;
    ++executed;
  };
  for (const std::string& input : corpus) run_one(input);
  std::uint64_t rng = seed;
  const std::string empty;
  for (std::uint64_t n = 0; n < runs; ++n) {
    const std::string& base = corpus.empty() ? empty : corpus[splitmix64(rng) % corpus.size()];
    run_one(mutate(base, corpus, rng, max_len));
  }
  std::printf("fuzz_driver: %s: %llu inputs (%zu from the corpus, %llu mutated, seed %llu): no failure\n",
              g_target_name.c_str(), static_cast<unsigned long long>(executed), corpus.size(),
              static_cast<unsigned long long>(runs), static_cast<unsigned long long>(seed));
  return 0;
}
