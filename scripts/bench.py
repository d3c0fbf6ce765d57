#!/usr/bin/env python3
"""Times `make synth` and `make test` (median of several runs) and their peak memory; used by `make bench`."""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import time


def run_once(command: list[str]) -> tuple[float, int]:
    """Wall seconds and the peak resident set (MiB) of the largest process in the command's tree."""
    start = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(process.pid, 0)
    elapsed = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(command)} failed; run it alone to see why")
    return elapsed, usage.ru_maxrss // 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=3, help="runs per command (default 3)")
    args = parser.parse_args()
    print(f"{'command':<12} {'runs':>4} {'median s':>9} {'min s':>7} {'max s':>7} {'peak MiB':>9}")
    for name, command in {"make synth": ["make", "synth"], "make test": ["make", "test"]}.items():
        results = [run_once(command) for _ in range(args.runs)]
        times = [t for t, _ in results]
        peak = max(m for _, m in results)
        print(f"{name:<12} {args.runs:>4} {statistics.median(times):>9.1f} {min(times):>7.1f} "
              f"{max(times):>7.1f} {peak:>9}")


if __name__ == "__main__":
    main()
