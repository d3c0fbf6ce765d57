"""`hpctl`: the parser built from the command families, dispatch, and the one place errors become a line on
stderr and an exit code. The commands are in hpctl/commands/, one module per family."""

from __future__ import annotations

import argparse
import functools
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from hpctl import __version__
from hpctl.aws import Clients, enable_debug_log
from hpctl.commands import (
    access,
    deploy,
    destroy,
    endpoints,
    examples,
    jobs,
    kubeconfig,
    monitoring,
    plan,
    quotas,
    recover,
    software,
    watch,
)
from hpctl.commands.options import add_common
from hpctl.commands.terminal import err
from hpctl.errors import (
    AWS_ERRORS,
    EXIT_CODE_TABLE,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    HpctlError,
    describe_aws_error,
    one_line,
)
from hpctl.target import resolve

MakeClients = Callable[[str, str | None], Any]

# In the order `hpctl --help` lists their commands.
FAMILIES = (watch, monitoring, quotas, access, recover, software, kubeconfig, deploy, destroy, examples, jobs,
            endpoints, plan)

DESCRIPTION = """Day-2 operations for a SageMaker HyperPod cluster orchestrated by Amazon EKS.

The cluster comes from --cluster NAME or ARN or from the app's config file (--config, default
config/default.yaml). The region from --region, else the cluster ARN, else AWS_REGION, AWS_DEFAULT_REGION
or the profile's region, else the config. These options go before or after the command."""


class _Parser(argparse.ArgumentParser):
    """Usage errors as one line (the full usage of update-software is a screenful), pointing at --help."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="hpctl",
        description=DESCRIPTION,
        epilog="example:\n  hpctl status --config config/prod.yaml\n\n" + EXIT_CODE_TABLE,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"hpctl {__version__}")
    add_common(parser, suppress=False)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for family in FAMILIES:
        family.register(sub)
    return parser


@functools.cache
def _shared_parser() -> argparse.ArgumentParser:
    """One parser per process: main() may run many times in one (a Python caller, the tests). parse_args does not
    change the parser, but it hands out an option's default object itself (argparse.py: parse_known_args sets
    `action.default` on the namespace); parse() copies the list defaults so no call sees another's."""
    return build_parser()


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    """The options of one command line, with no list shared with the parser or another call's options."""
    args = _shared_parser().parse_args(argv)
    for name, value in vars(args).items():
        if isinstance(value, list):
            setattr(args, name, list(value))
    return args


def main(argv: Sequence[str] | None = None, *, make_clients: MakeClients | None = None) -> int:
    try:
        args = parse(argv)
    except SystemExit as exit_:  # --help, --version and usage errors
        return int(exit_.code or 0)
    from infra.errors import ConfigError

    target = None
    try:
        if args.debug:
            enable_debug_log()
        need_cluster = getattr(args, "need_cluster", True) and not getattr(args, "eks_cluster", None)
        target = resolve(args, need_config=getattr(args, "need_config", False), need_cluster=need_cluster)
        if warning := target.region_warning():
            err(warning)
        factory = make_clients or (lambda region, profile: Clients(region, profile))
        return int(args.handler(args, target, factory(target.region, target.profile)))
    except ConfigError as error:
        err(str(error))
        return EXIT_USAGE
    except HpctlError as error:
        err(str(error))
        return error.exit_code
    except AWS_ERRORS as error:
        line, code = describe_aws_error(error, target.region if target else None)
        err(line)
        return code
    except KeyboardInterrupt:
        err("interrupted")
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        return EXIT_OK
    except (OSError, ValueError) as error:  # a path that cannot be written or read, a file that is not JSON
        err(one_line(f"{type(error).__name__}: {error}"))
        return EXIT_USAGE
