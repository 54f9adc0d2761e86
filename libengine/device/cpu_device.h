// CpuDevice: the CPU backend of Device. "Device memory" is host memory with a hard byte budget
// (the scenario's device_memory), so a model that does not fit fails exactly as on a GPU.
// The compute stream runs work inline on the calling thread (the kernels are OpenMP-parallel
// themselves); the transfer and collective streams each own one worker thread, so copies really
// overlap compute. Copies are real memcpy's, since host→device on this backend is host→host.
//
// With copy_threads false the two transfer streams run their work on the calling thread too, as
// the compute stream does. For one process training alone: its kernels' OpenMP team has every
// core, so a copy thread never runs beside the compute — each wake-up preempts a team thread and
// stalls the team at its next barrier (perf sched on scenarios/offload-nvme.json: ~95 preemptions
// a step by the host-to-device thread; the step 1.2-1.5 ms shorter without it). Ranks keep the
// threads: their gradient copies wait for reduce-scatters on the collective stream, which on the
// caller would stall the backward pass.
#pragma once

#include <array>
#include <cstdint>
#include <memory>

#include "libengine/device/device.h"

namespace zinf::device {

struct CpuDeviceOptions {
  std::uint64_t memory_budget_bytes = 0;       // 0: unbounded (still counted)
  std::uint64_t host_memory_budget_bytes = 0;  // of allocate_host(); 0: unbounded (still counted)
  bool copy_threads = true;                    // false: transfer streams run on the caller (above)
};

std::unique_ptr<Device> make_cpu_device(const CpuDeviceOptions& options);

}  // namespace zinf::device
