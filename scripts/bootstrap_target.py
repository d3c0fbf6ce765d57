#!/usr/bin/env python3
"""Prints the environment ``make bootstrap`` bootstraps, ``aws://<account>/<region>``; with ``--trust-options``, the
trust options of ``cdk bootstrap`` instead (a fleet's target environment trusting the pipeline's account).

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
POLICY_ARN = re.compile(r"^arn:aws[a-z-]*:iam::(aws|\d{12}):policy/[\w+=,.@/-]+$")


def trust_options(trust: str, execution_policies: str) -> list[str]:
    """``--trust <account>`` for each account of ``trust`` (comma-separated), and
    ``--cloudformation-execution-policies`` for each policy ARN.

    The CDK CLI refuses ``--trust`` without execution policies (aws-cdk 2.1148.1 lib/index.js,
    MissingExecutionPoliciesForTrust; without trust it falls back to AdministratorAccess with a warning): refused here
    first, naming the make variable. ``--trust`` also lets the trusted account assume the lookup role
    (bootstrap-template.yaml, LookupRole: TrustedAccounts), the read-only role of the pipeline's guard."""
    accounts = [a.strip() for a in trust.split(",") if a.strip()]
    policies = [p.strip() for p in execution_policies.split(",") if p.strip()]
    for account in accounts:
        if not ACCOUNT_ID.match(account):
            raise ConfigError("TRUST", account, "an AWS account ID is 12 digits")
    for policy in policies:
        if not POLICY_ARN.match(policy):
            raise ConfigError("EXECUTION_POLICIES", policy, "not an IAM policy ARN (arn:aws:iam::aws:policy/<name>)")
    if accounts and not policies:
        raise ConfigError("EXECUTION_POLICIES", None, "required with TRUST: the policies CloudFormation deploys "
                          "with for the trusted pipeline (e.g. arn:aws:iam::aws:policy/AdministratorAccess, or a "
                          "narrower one)")
    if policies and not accounts:
        raise ConfigError("TRUST", None, "EXECUTION_POLICIES is given without an account to trust")
    return [*(arg for a in accounts for arg in ("--trust", a)),
            *(arg for p in policies for arg in ("--cloudformation-execution-policies", p))]


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
    parser.add_argument("--trust-options", action="store_true", help="print cdk bootstrap's trust options instead")
    parser.add_argument("--trust", default="", help="accounts to trust, comma-separated (a fleet's pipeline account)")
    parser.add_argument("--execution-policies", default="",
                        help="policy ARNs CloudFormation deploys with, comma-separated")
    args = parser.parse_args(argv)
    try:
        if args.trust_options:
            print(" ".join(trust_options(args.trust, args.execution_policies)))
            return 0
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
