"""For data scientists: render-examples writes the example manifests for the config (hpctl/examples.py)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import yaml

from hpctl import examples, teams
from hpctl.commands.options import add_command, bounded, positive
from hpctl.commands.terminal import err
from hpctl.errors import EXIT_OK, UsageError
from hpctl.output import print_json
from hpctl.target import Target


def cmd_render_examples(args: argparse.Namespace, t: Target, clients: Any) -> int:
    minutes = args.checkpoint_interval_minutes
    if not 0 < minutes < float("inf"):  # also refuses NaN
        raise UsageError(f"--checkpoint-interval-minutes must be more than zero, got {minutes:g}")
    where = teams.placement(t.cfg, args.team, args.priority)
    fsx_id = args.fsx_file_system_id
    if fsx_id is not None:
        examples.check_fsx_model_source(t.cfg, fsx_id)
    files = examples.render(t.cfg, gpus=args.gpus, efa=args.efa, checkpoint_interval_minutes=minutes, where=where,
                            fsx_file_system_id=fsx_id)
    refusal = examples.training_refusal(t.cfg, where)
    if args.out == "-":
        if args.json:  # each file's Kubernetes objects, by file name
            print_json({name: list(yaml.safe_load_all(text)) for name, text in files.items()})
        else:
            print(examples.stream(files), end="")
        if refusal:
            err(refusal)
        return EXIT_OK
    written, removed = examples.write(files, Path(args.out))
    if refusal:
        err(refusal)
    if args.json:
        print_json({"written": [str(p) for p in written], "removed": [str(p) for p in removed],
                    "not_rendered": [{"file": examples.TRAINING_FILE, "reason": refusal}] if refusal else []})
    else:
        for path in written:
            print(f"wrote {path}")
        for path in removed:
            print(f"removed {path} (an earlier rendering; this config makes no such file)")
    return EXIT_OK


def register(sub: Any) -> None:
    p = add_command(
        sub,
        "render-examples",
        cmd_render_examples,
        "write the data-scientist manifests (training with auto-resume, inference endpoints, NCCL smoke test) "
        "for the config",
        "hpctl render-examples --config config/prod.yaml --out my-examples\n"
        "  hpctl render-examples --config config/prod.yaml --team research --priority training --out research",
        need_config=True,
    )
    p.add_argument(
        "--out", default="-", metavar="DIR", help="directory to write to (default -: one YAML stream on stdout)"
    )
    p.add_argument("--gpus", type=positive,
                   help="NVIDIA GPUs per node (needed for a type without a GPU count in the instance catalog)")
    p.add_argument("--efa", type=bounded(0),
                   help="EFA devices per node (needed for a type without an EFA count in the instance catalog)")
    p.add_argument(
        "--checkpoint-interval-minutes",
        type=float,
        default=examples.CHECKPOINT_INTERVAL_MINUTES,
        metavar="M",
        help="how often the training example checkpoints, e.g. the interval `hpctl plan` gives "
        f"(default {examples.CHECKPOINT_INTERVAL_MINUTES:g})",
    )
    p.add_argument(
        "--fsx-file-system-id", metavar="FS_ID",
        help="with addons.inference_operator: the custom model's weights are on this FSx for Lustre file system (the "
             "storage stack's FileSystemId output) instead of the first bucket of addons.s3_csi",
    )
    add_team_options(p, "render the manifests")


def add_team_options(p: argparse.ArgumentParser, what: str) -> None:
    """--team and --priority of the commands that place jobs in a team's queue (hpctl/teams.py)."""
    p.add_argument("--team", metavar="TEAM",
                   help=f"{what} for this team of addons.task_governance.teams: its namespace hyperpod-ns-TEAM and "
                        "its Kueue queue")
    p.add_argument("--priority", metavar="CLASS",
                   help="with --team: a priority class of addons.task_governance.priority_classes")
