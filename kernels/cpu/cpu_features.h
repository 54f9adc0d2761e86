// What the CPU can execute, and which instruction-set level the CPU kernels use. Detected once per
// process (the first call), then read-only, so every function here is thread-safe.
//
// The kernels come in three variants, chosen at run time (never by global -m flags, so one binary
// runs on any x86-64):
//   kAvx512  AVX-512 F + BW + VL (with AVX2, FMA and F16C): 16 floats per vector
//   kAvx2    AVX2 + FMA + F16C: 8 floats per vector (the CI baseline)
//   kScalar  plain C++, for any CPU; also the reference the vector variants are tested against
// Every public kernel entry dispatches to best_isa(); the overloads that take an `Isa` run one
// variant on purpose, for tests and benchmarks.
#pragma once

#include <string_view>

namespace zinf::kernels::cpu {

struct CpuFeatures {
  bool avx2 = false;
  bool fma = false;
  bool f16c = false;
  bool avx512f = false;
  bool avx512bw = false;
  bool avx512vl = false;
  bool avx512bf16 = false;  // reported only: its bf16 conversion flushes denormals, see convert.cpp
};

enum class Isa { kScalar, kAvx2, kAvx512 };

// The features of the CPU this process runs on (on non-x86 builds: all false).
const CpuFeatures& cpu_features();

// True when `isa`'s kernel variants can run on this CPU; kScalar always can.
bool isa_supported(Isa isa);

// The level the public kernel entries use: the highest supported level, capped by the environment
// variable ZINF_KERNELS_ISA ("scalar", "avx2" or "avx512") when it is set, so a benchmark or a
// bug hunt can run the lower paths on a machine that has the higher ones. A value that names an
// unsupported or unknown level is ignored (the detected level is used). Read once.
Isa best_isa();

// "scalar", "avx2" or "avx512", for reports and test names.
std::string_view isa_name(Isa isa);

}  // namespace zinf::kernels::cpu
