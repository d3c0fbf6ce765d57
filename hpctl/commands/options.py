"""The options several commands share, defined once: target, output, confirmation, polling; argument types."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

from hpctl import cluster as api
from hpctl.errors import UsageError, exit_code_table
from hpctl.target import Target, parse_duration
from hpctl.wait import MIN_INTERVAL


def add_common(parser: argparse.ArgumentParser, suppress: bool) -> None:
    """The options every command takes. On the commands they default to SUPPRESS, so that a value given
    before the command (`hpctl --region X status`) is not overwritten by the command's default."""
    unset: dict[str, Any] = {"default": argparse.SUPPRESS} if suppress else {}
    where = parser.add_argument_group("target")
    where.add_argument(
        "--cluster", help="HyperPod cluster name or ARN (default: hyperpod.cluster_name of the config)", **unset
    )
    where.add_argument("--config", help="the app's config file (default: $HPCTL_CONFIG, else config/default.yaml)",
                       **unset)
    where.add_argument(
        "--region",
        help="AWS region (default: the cluster ARN's, else AWS_REGION/AWS_DEFAULT_REGION/profile, else the config)",
        **unset,
    )
    where.add_argument("--profile", help="AWS named profile", **unset)
    parser.add_argument("--json", action="store_true", help="machine-readable JSON on stdout", **unset)
    parser.add_argument("--debug", action="store_true", help="log every AWS request on stderr (botocore)", **unset)


Handler = Callable[[argparse.Namespace, Target, Any], int]


def add_command(
    sub: Any, name: str, handler: Handler, help_text: str, example: str, **defaults: bool
) -> argparse.ArgumentParser:
    """A command with the common options, its help as description, an epilog of example and exit codes, and
    its handler. `defaults`: need_config=True for a command that reads the config file, need_cluster=False
    for one that needs no cluster (hpctl.cli.main reads both)."""
    common = argparse.ArgumentParser(add_help=False)
    add_common(common, suppress=True)
    parser: argparse.ArgumentParser = sub.add_parser(
        name,
        parents=[common],
        help=help_text,
        description=help_text,
        epilog=f"example:\n  {example}\n\n{exit_code_table(name)}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.set_defaults(handler=handler, **defaults)
    return parser


def add_yes(p: argparse.ArgumentParser) -> None:
    """--yes/-y of the commands that ask before they change something (see terminal.confirm)."""
    p.add_argument("--yes", "-y", action="store_true", help="do not ask for confirmation")


def add_polling(p: argparse.ArgumentParser, *, interval: str, timeout: str | None = None, when: str = "") -> None:
    """--interval, and --timeout when given, of a command that polls; `when` names the option that makes it
    poll (e.g. "with --wait"), for a command that polls only then. Read them with parse_duration/interval."""
    lead = f"{when}: " if when else ""
    if timeout is not None:
        forms = "" if when else "; 90s, 15m, 2h30m, 1d"
        p.add_argument("--timeout", default=timeout, help=f"{lead}give up after this long (default {timeout}{forms})")
    floor = "" if when else f", at least {MIN_INTERVAL:g}s"
    p.add_argument("--interval", default=interval, help=f"{lead}time between polls (default {interval}{floor})")


class _Deprecated(argparse.Action):
    """An old spelling of an option: stores into the new one's destination and says which to use on stderr."""

    def __init__(self, *args: Any, replacement: str, **kwargs: Any) -> None:
        self.replacement = replacement
        super().__init__(*args, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        print(f"hpctl: warning: {option_string} is deprecated, use {self.replacement}", file=sys.stderr)
        setattr(namespace, self.dest, values)


def add_deprecated(p: argparse.ArgumentParser, old: str, new: str, dest: str, **kwargs: Any) -> None:
    """`old` still works as `new` (same destination and type) with a warning, and --help says to use `new`."""
    p.add_argument(old, dest=dest, action=_Deprecated, replacement=new, help=f"deprecated: use {new}", **kwargs)


def interval(text: str) -> float:
    """--interval in seconds; UsageError below MIN_INTERVAL."""
    seconds = parse_duration(text)
    if seconds < MIN_INTERVAL:
        raise UsageError(f"--interval {text} is too short: at least {MIN_INTERVAL:g}s between polls")
    return seconds


def bounded(low: int, high: int | None = None) -> Callable[[str], int]:
    """An argparse type: an integer in [low, high], with a one-line error otherwise."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
        if value < low or (high is not None and value > high):
            raise argparse.ArgumentTypeError(
                f"{value} is out of range: {low}-{high}" if high is not None else f"must be at least {low}"
            )
        return value

    return parse


positive = bounded(1)


def level(text: str) -> str:
    """--level in any case: warn, WARN and Warn are Warn."""
    for name in api.LEVELS:
        if name.lower() == text.lower():
            return name
    raise argparse.ArgumentTypeError(f"unknown level {text!r} (valid: {', '.join(api.LEVELS)})")
