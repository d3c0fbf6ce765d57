#!/usr/bin/env python3
"""Prints the environment ``make bootstrap`` bootstraps, ``aws://<account>/<region>``.

The account is ``--account`` if given, else the config's ``account`` if it pins one, else the account of
the credentials (STS GetCallerIdentity, through hpctl's boto3 clients); the region is ``--region`` if
given, else the config's ``region``. Errors are one line on stderr: exit 2 for a bad argument or config,
3 when the credentials' account cannot be read.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from botocore.exceptions import BotoCoreError, ClientError

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from hpctl.aws import Clients  # noqa: E402
from infra.config import load_config, sagemaker_regions  # noqa: E402
from infra.errors import ConfigError  # noqa: E402

ACCOUNT_ID = re.compile(r"^\d{12}$")


def bootstrap_target(config_path: str, account: str | None, region: str | None, clients: Clients | None = None) -> str:
    """``aws://<account>/<region>`` for ``config_path``; ``clients`` reads the credentials' account."""
    config = load_config(config_path)
    region = region or config.region
    if region not in sagemaker_regions():
        raise ConfigError("REGION", region, "not a region where SageMaker is available (per botocore)")
    if account is None:
        account = config.account
    if account is None:
        account = str((clients or Clients(region))("sts").get_caller_identity()["Account"])
    if not ACCOUNT_ID.match(account):
        raise ConfigError("ACCOUNT", account, "an AWS account ID is 12 digits")
    return f"aws://{account}/{region}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="config/default.yaml")
    parser.add_argument("--account", help="12-digit account ID (default: the config's, else the credentials')")
    parser.add_argument("--region", help="region (default: the config's)")
    args = parser.parse_args(argv)
    try:
        print(bootstrap_target(args.config, args.account or None, args.region or None))
    except ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except (BotoCoreError, ClientError) as error:
        print(f"error: cannot read the credentials' account (pass ACCOUNT=...): {error}", file=sys.stderr)
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
