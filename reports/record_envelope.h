// Record envelope: the fields every JSON record zinf writes (plan, train, bench, ...) starts with,
// so any record can be traced to the binary, the machine and the moment that produced it, and a
// reader can tell from "schema" alone whether it understands the rest.
//
//   {"schema": "zinf.plan/1",
//    "generator": {"name": "zinf", "version", "git_sha", "build_type", "compiler",
//                  "features": {"cuda": {"enabled": true, "detail": "sm_90"}, ...}},
//    "created_at": "2024-05-01T12:34:56Z",
//    "host": {"hostname", "cpu_model", "logical_cpus", "memory_bytes"},
//    "conditions": {"load_avg_1m_before", "load_avg_1m_after", "steal_percent", "cores", "governor",
//                   "interval_seconds"}}
//
// "conditions" (run_conditions.h) is what the record was measured under, from the command's start
// to the record; records written before it existed lack it, and `zinf compare` says "unknown".
// Adding it did not bump any schema version: a version changes when a field changes meaning or
// disappears, and readers ignore fields they do not know.
//
// This is only the envelope: each command adds its own payload fields to the returned object, and
// GPUs and NVMe paths are described by the payloads that use them. Host probing reads Linux /proc
// files and degrades to "unknown" / 0 elsewhere rather than failing, because a record without a CPU
// model is still worth writing.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "reports/run_conditions.h"

namespace zinf::reports {

// The envelope for a record of `kind` ("plan", "train", "bench"; lower-case, non-empty) at
// `schema_version` (>= 1; bumped whenever a field changes meaning or disappears). `started` is the
// snapshot taken when the command started (cli::Io::started); "conditions" compares it with now.
// Preconditions are checked with ZINF_CHECK. Reads the clock and probes the host on every call;
// thread-safe.
nlohmann::json make_record_envelope(std::string_view kind, int schema_version, const ConditionsSnapshot& started);

// {"hostname", "cpu_model", "logical_cpus", "memory_bytes"} of the machine running this process.
// Thread-safe; never fails (unknown values are "unknown" or 0).
nlohmann::json host_description();

// `time` in UTC as ISO-8601 with whole seconds and a 'Z': "2024-05-01T12:34:56Z".
std::string format_utc_timestamp(std::chrono::system_clock::time_point time);

// The first "model name" value in the text of /proc/cpuinfo, or "unknown" when there is none
// (aarch64 kernels, for one, do not print it).
std::string cpu_model_from_cpuinfo(std::string_view cpuinfo_text);

// MemTotal from the text of /proc/meminfo in bytes, or 0 when it is missing or malformed.
std::uint64_t memory_bytes_from_meminfo(std::string_view meminfo_text);

}  // namespace zinf::reports
