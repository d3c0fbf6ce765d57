"""`hpctl plan`: the failure model of hpctl/plan.py applied to the config's instance groups, as a table,
JSON or a goodput plot."""

from __future__ import annotations

import argparse
import datetime as dt
import math
import shlex
import sys
from dataclasses import asdict
from importlib import metadata
from pathlib import Path
from typing import Any

from hpctl import cluster as api
from hpctl import plan
from hpctl.commands.options import add_command
from hpctl.errors import EXIT_OK, UsageError
from hpctl.output import print_json, print_table
from hpctl.target import Target
from infra import DISTRIBUTIONS
from infra.facts.instances import accelerators_per_instance


def _positive(name: str, value: float, allow_zero: bool = False) -> float:
    if not math.isfinite(value) or value < 0 or (value == 0 and not allow_zero):
        raise UsageError(f"{name} must be {'zero or more' if allow_zero else 'more than zero'}, got {value:g}")
    return value


def _groups(cfg: Any, only: str | None, spot_known: bool = False) -> tuple[list[tuple[Any, int]], list[str]]:
    """(group, accelerators per instance) of the accelerated groups, and a line per skipped group. A spot group is
    planned only with a spot interruption rate (`spot_known`): without one it would be planned as on-demand."""
    groups = cfg.hyperpod.instance_groups
    if only is not None:
        names = [g.name for g in groups]
        if only not in names:
            raise UsageError(f"--group {only}: no such instance group in the config (have: {', '.join(names)})")
        groups = [g for g in groups if g.name == only]
    planned, skipped = [], []
    for group in groups:
        count = accelerators_per_instance(group.instance_type)
        if count is None:
            reason = f"{group.instance_type} has no count of its accelerators in the instance catalog"
        elif count == 0:
            reason = f"{group.instance_type} has no accelerators in the instance catalog"
        elif group.instance_count == 0:
            reason = "instance_count is 0"
        elif group.capacity == "spot" and not spot_known:
            reason = ("capacity is spot, whose reclaims the failure model does not know: pass "
                      "--spot-interruption-percent-per-month P to plan it")
        else:
            planned.append((group, count))
            continue
        if only is not None:
            spot = group.capacity == "spot" and count
            raise UsageError(f"--group {only}: {reason}" + ("" if spot else "; plan needs a group with accelerators"))
        skipped.append(f"skipped {group.name}: {reason}")
    if not planned:
        raise UsageError(f"no instance group with accelerators in the config ({'; '.join(skipped)})")
    return planned, skipped


def _write_throughput(args: argparse.Namespace, cfg: Any) -> tuple[float, str]:
    fsx = cfg.storage.fsx_lustre
    if args.write_mib_per_s is not None:
        return _positive("--write-mib-per-s", args.write_mib_per_s), "--write-mib-per-s"
    if fsx.enabled:
        source = f"FSx for Lustre {fsx.capacity_gib} GiB x {fsx.throughput_per_tib} MB/s/TiB"
        return plan.fsx_write_mib_per_s(fsx.capacity_gib, fsx.throughput_per_tib), source
    raise UsageError("--write-mib-per-s is required: storage.fsx_lustre is disabled, so the config has no throughput")


def _failure_rate(
    args: argparse.Namespace, t: Target, clients: Any, planned: list[tuple[Any, int]]
) -> tuple[float, str]:
    if args.failures_per_accelerator_hour is not None:
        return _positive("--failures-per-accelerator-hour", args.failures_per_accelerator_hour), "given"
    default = plan.DEFAULT_FAILURES_PER_ACCELERATOR_HOUR, plan.DEFAULT_SOURCE
    if not args.from_events:
        return default
    by_group = {g.name: g.instance_count * a for g, a in planned}
    estimate = plan.estimate_from_events(
        api.iter_events(clients("sagemaker"), t.cluster), by_group, dt.datetime.now(dt.UTC)
    )
    basis = (
        f"{estimate.failures} failed instance(s) (Error events about an instance) in "
        f"{estimate.accelerator_hours:,.0f} accelerator-hours of {t.cluster}'s events"
    )
    if estimate.rate is None:
        print(
            f"hpctl: warning: {basis}: fewer than {plan.MIN_EVENTS} failures, using the default rate instead",
            file=sys.stderr,
        )
        return default
    return estimate.rate, basis


def plot_requirement() -> str:
    """matplotlib as the installed distribution's `plot` extra declares it (its pin or range), else unversioned."""
    for name in DISTRIBUTIONS:
        try:
            declared = metadata.requires(name) or []
        except metadata.PackageNotFoundError:
            continue
        for requirement in declared:
            spec, _, marker = requirement.partition(";")
            if spec.strip().lower().startswith("matplotlib") and "plot" in marker:
                return spec.strip().replace(" ", "")
    return "matplotlib"


def _require_matplotlib() -> None:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        # Into the environment hpctl runs from, whichever distribution put it there (an extra of a local checkout
        # is not on the package index).
        command = f"{shlex.quote(sys.executable)} -m pip install {shlex.quote(plot_requirement())}"
        raise UsageError(f"--plot needs matplotlib, which is not installed here: {command}") from None


def cmd_plan(args: argparse.Namespace, t: Target, clients: Any) -> int:
    cfg = t.cfg
    checkpoint_gib = _positive("--checkpoint-gib", args.checkpoint_gib)
    restart_minutes = _positive("--restart-minutes", args.restart_minutes, allow_zero=True)
    repair_hours = _positive("--repair-hours", args.repair_hours)
    spot_percent = args.spot_interruption_percent_per_month
    if spot_percent is not None and not 0 < spot_percent < 100:
        raise UsageError(f"--spot-interruption-percent-per-month must be more than 0 and less than 100, got "
                         f"{spot_percent:g}")
    planned, skipped = _groups(cfg, args.group, spot_percent is not None)
    spot_rate = plan.spot_interruptions_per_instance_hour(spot_percent) if spot_percent is not None else 0.0
    write_mib_per_s, write_source = _write_throughput(args, cfg)
    if args.plot:
        _require_matplotlib()
    rate, rate_source = _failure_rate(args, t, clients, planned)
    write_seconds = plan.checkpoint_write_seconds(checkpoint_gib, write_mib_per_s)
    plans = [
        plan.plan_group(
            group.name,
            group.instance_count,
            count,
            failures_per_accelerator_hour=rate,
            write_seconds=write_seconds,
            restart_minutes=restart_minutes,
            repair_hours=repair_hours,
            spot_interruptions_per_instance_hour=spot_rate if group.capacity == "spot" else 0.0,
        )
        for group, count in planned
    ]
    assumptions = (
        f"assuming {rate:.4g} independent interruptions per accelerator-hour at a constant rate ({rate_source}), "
        f"{checkpoint_gib:g} GiB checkpoints written at {write_mib_per_s:,.0f} MiB/s ({write_source}), "
        f"{restart_minutes:g} min to restart, {repair_hours:g} h to replace an instance, "
        f"spares for a {plan.SPARE_RISK:.0%} risk of running short"
    )
    spot = [group.name for group, _ in planned if group.capacity == "spot"]
    if spot:
        assumptions += (f"; spot groups ({', '.join(spot)}) also lose {spot_percent:g}% of their instances a month "
                        f"({spot_rate:.4g} per instance-hour; {plan.SPOT_SOURCE}, given)")
    if args.plot:
        from hpctl.plan_plot import draw

        draw(plans, restart_minutes / 60, Path(args.plot))
    if args.json:
        print_json([asdict(p) for p in plans])
        print(assumptions, file=sys.stderr)
        return EXIT_OK
    print_table(
        ["GROUP", "INSTANCES", "ACCEL", "INTERRUPTIONS/DAY", "MTBF", "CKPT WRITE", "INTERVAL", "GOODPUT", "SPARES"],
        [
            [
                p.group,
                p.instances,
                p.accelerators_per_instance,
                f"{p.interruptions_per_day:.3g}",
                f"{p.mtbf_hours:.1f} h",
                f"{p.checkpoint_write_seconds:.0f} s",
                f"{p.checkpoint_interval_minutes:.0f} min",
                f"{p.goodput:.1%}",
                p.spare_instances,
            ]
            for p in plans
        ],
    )
    for line in skipped:
        print(line)
    print(assumptions)
    if args.plot:
        print(f"plot written to {args.plot}")
    return EXIT_OK


def register(sub: Any) -> None:
    p = add_command(
        sub,
        "plan",
        cmd_plan,
        "checkpoint interval, goodput and spare instances per accelerated group, from a failure model",
        "hpctl plan --config config/prod.yaml --checkpoint-gib 500 --write-mib-per-s 4000",
        need_config=True,
    )
    p.add_argument("--checkpoint-gib", type=float, required=True, metavar="G", help="size of one checkpoint, in GiB")
    p.add_argument("--group", help="only this instance group")
    p.add_argument(
        "--write-mib-per-s",
        type=float,
        metavar="W",
        help="checkpoint write throughput in MiB/s (required when storage.fsx_lustre is off; overrides FSx's)",
    )
    p.add_argument(
        "--restart-minutes",
        type=float,
        default=plan.DEFAULT_RESTART_MINUTES,
        metavar="R",
        help=f"minutes from an interruption to training again (default {plan.DEFAULT_RESTART_MINUTES:g})",
    )
    p.add_argument(
        "--repair-hours",
        type=float,
        default=plan.DEFAULT_REPAIR_HOURS,
        metavar="H",
        help=f"hours to replace a failed instance, for the spares (default {plan.DEFAULT_REPAIR_HOURS:g})",
    )
    rate = p.add_mutually_exclusive_group()
    rate.add_argument(
        "--failures-per-accelerator-hour",
        type=float,
        metavar="F",
        help=f"interruption rate (default {plan.DEFAULT_FAILURES_PER_ACCELERATOR_HOUR:.4g}: {plan.DEFAULT_SOURCE})",
    )
    rate.add_argument(
        "--from-events",
        action="store_true",
        help="estimate the rate from the cluster's ListClusterEvents history (falls back when too few)",
    )
    p.add_argument("--plot", metavar="FILE.png", help="also draw goodput against the checkpoint interval")
    p.add_argument(
        "--spot-interruption-percent-per-month",
        type=float,
        metavar="P",
        help="plan the capacity: spot groups, which are skipped without it, with this share of their instances "
        "reclaimed a month: the EC2 Spot Instance Advisor's frequency of interruption for the type and region "
        "(bands <5%%, 5-10%%, ... >20%%: take the band's upper end); HyperPod publishes none of its own",
    )
