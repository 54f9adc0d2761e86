// The sum of two bf16 or fp16 arrays as the communicators define it: each element converted to
// fp32, added in fp32, and rounded once to the 16-bit format (round to nearest even). MPI has no
// 16-bit float types or sums, so the MPI communicator's user operators (and the benchmark's plain
// MPI baseline) call this.
#pragma once

#include <cstddef>

#include "libengine/core/dtype.h"

namespace zinf::comm {

// inout[i] = round(float(in[i]) + float(inout[i])) for i < n. Precondition: dtype is kBF16 or
// kF16; the arrays do not overlap. Reentrant.
void half_sum_in_place(DType dtype, const void* in, void* inout, std::size_t n);

}  // namespace zinf::comm
