// Compute threads: how many threads the CPU kernels (OpenMP teams) and OpenBLAS's GEMMs use.
// One knob for both, because a training step alternates between them and two pools sized
// differently leave cores idle or oversubscribed. Process-wide (OpenMP and OpenBLAS keep it
// globally); the CLI sets it once from the scenario's "threads" before any compute runs.
#pragma once

namespace zinf::kernels::cpu {

// n >= 1 threads for both; n <= 0 restores "all logical CPUs".
void set_compute_threads(int n);
// The count the kernels use now.
int compute_threads();

}  // namespace zinf::kernels::cpu
