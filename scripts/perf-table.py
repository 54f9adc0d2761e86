#!/usr/bin/env python3
"""Prints the Markdown table of measured figures in zinf train records, with each record's provenance.

    scripts/perf-table.py RECORD.json...

One row per record (zinf.train/1): the scenario, steps run, the median step, tokens/s, MFU, peak memory
per tier, and where the figures come from: the host, the zinf build (git SHA) and when the record was
written. docs/performance.md shows this table for the committed example records under docs/examples/,
and the runnable-docs test (tests/cli/docs_test.py) regenerates it and fails when the page and the
records disagree. Nothing is computed beyond unit scaling: every figure is read from a record.
Exit status 2 for a file that is not a zinf.train/1 record.
"""

import json
import sys


def size(value):
    if value is None:
        return "-"
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if value >= scale:
            return f"{value / scale:.1f} {unit}"
    return f"{value:.0f} B"


def mfu_text(mfu, inconsistent):
    # zinf's own rule (docs/bench.md, "MFU is never printed above 100%"): an MFU above 1 means the
    # peak probe and the steps saw different loads; records written before the rule do not flag it.
    if mfu is None:
        return "-"
    if inconsistent or mfu > 1:
        return "not reported (above 100%)"
    return f"{100 * mfu:.1f}%"


def row(path):
    with open(path, encoding="utf-8") as f:
        record = json.load(f)
    if record.get("schema") != "zinf.train/1":
        raise SystemExit(f"{path}: schema {record.get('schema')!r}; expected a zinf.train/1 record")
    summary = record["summary"]
    memory = record["memory"]
    host = record["host"]
    generator = record["generator"]
    mfu = summary.get("mfu")
    nvme = memory.get("nvme", {}).get("peak_bytes")
    return [
        f"`{path}`",
        record.get("scenario_path", "-"),
        str(summary["steps_run"]),
        f"{summary['step_ms']['median']:.1f} ms",
        f"{summary['tokens_per_s']:.3g}" if summary["tokens_per_s"] < 100 else f"{summary['tokens_per_s']:.0f}",
        mfu_text(mfu, summary.get("mfu_inconsistent", False)),
        size(memory["device"]["peak_bytes"]),
        size(memory["host"]["peak_bytes"]),
        size(nvme) if nvme else "-",
        f"{host['cpu_model']}, {host['logical_cpus']} CPUs",
        f"`{generator['git_sha']}`",
        record["created_at"],
    ]


def main():
    if len(sys.argv) < 2:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    header = ["record", "scenario", "steps", "step (median)", "tokens/s", "MFU", "device peak", "host peak",
              "NVMe peak", "host", "zinf git", "recorded (UTC)"]
    print("| " + " | ".join(header) + " |")
    print("| " + " | ".join("---" for _ in header) + " |")
    for path in sys.argv[1:]:
        print("| " + " | ".join(row(path)) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
