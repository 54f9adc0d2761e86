// CPU feature detection through __builtin_cpu_supports (cpuid plus the OS's XSAVE check, so
// AVX-512 is reported only when the kernel saves the ZMM state); F16C by cpuid under Clang.
#include "kernels/cpu/cpu_features.h"

#if defined(__clang__) && (defined(__x86_64__) || defined(__i386__))
#include <cpuid.h>
#endif

#include <cstdlib>
#include <string_view>

namespace zinf::kernels::cpu {
namespace {

CpuFeatures detect() {
  CpuFeatures features;
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  features.avx2 = __builtin_cpu_supports("avx2") != 0;
  features.fma = __builtin_cpu_supports("fma") != 0;
#if defined(__clang__)
  // Clang 14's __builtin_cpu_supports does not know "f16c": read CPUID leaf 1, ECX bit 29. F16C
  // uses the AVX (YMM) state, which the "avx2" check above already requires the OS to save.
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  features.f16c = __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & bit_F16C) != 0;
#else
  features.f16c = __builtin_cpu_supports("f16c") != 0;
#endif
  features.avx512f = __builtin_cpu_supports("avx512f") != 0;
  features.avx512bw = __builtin_cpu_supports("avx512bw") != 0;
  features.avx512vl = __builtin_cpu_supports("avx512vl") != 0;
  features.avx512bf16 = __builtin_cpu_supports("avx512bf16") != 0;
#endif
  return features;
}

Isa detected_isa() {
  if (isa_supported(Isa::kAvx512)) return Isa::kAvx512;
  if (isa_supported(Isa::kAvx2)) return Isa::kAvx2;
  return Isa::kScalar;
}

Isa choose_isa() {
  const Isa detected = detected_isa();
  const char* cap = std::getenv("ZINF_KERNELS_ISA");
  if (cap == nullptr) return detected;
  const std::string_view name(cap);
  for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512}) {
    if (name == isa_name(isa) && isa_supported(isa)) return isa;
  }
  return detected;
}

}  // namespace

const CpuFeatures& cpu_features() {
  static const CpuFeatures features = detect();
  return features;
}

bool isa_supported(Isa isa) {
  const CpuFeatures& f = cpu_features();
  const bool avx2 = f.avx2 && f.fma && f.f16c;
  switch (isa) {
    case Isa::kScalar:
      return true;
    case Isa::kAvx2:
      return avx2;
    case Isa::kAvx512:
      return avx2 && f.avx512f && f.avx512bw && f.avx512vl;
  }
  return false;
}

Isa best_isa() {
  static const Isa isa = choose_isa();
  return isa;
}

std::string_view isa_name(Isa isa) {
  switch (isa) {
    case Isa::kScalar:
      return "scalar";
    case Isa::kAvx2:
      return "avx2";
    case Isa::kAvx512:
      return "avx512";
  }
  return "?";
}

}  // namespace zinf::kernels::cpu
