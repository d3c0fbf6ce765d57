"""Which cluster, region and profile a command talks to: from --cluster/--region or the app's config file."""

from __future__ import annotations

import datetime as dt
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hpctl.aws import configured_region
from hpctl.errors import UsageError

DEFAULT_CONFIG = "config/default.yaml"
# The config file when --config is not given (before DEFAULT_CONFIG): for running hpctl outside the repository.
CONFIG_ENV = "HPCTL_CONFIG"


@dataclass
class Target:
    cluster: str  # HyperPod cluster name or ARN
    region: str
    profile: str | None
    cfg: Any  # infra.config.AppConfig, or None when --cluster and --region were enough
    explicit_cluster: bool
    region_source: str = "--region"

    def region_warning(self) -> str | None:
        """A line to show when the region is not the one the config deploys to (drift, preflight and the
        config's cluster name then talk about another region)."""
        if self.cfg is None or self.region == self.cfg.region:
            return None
        return f"warning: using region {self.region} (from {self.region_source}), not the config's {self.cfg.region}"


def _load(path: str) -> Any:
    from infra.config import load_config, require_network  # ConfigError is turned into exit 2 by the CLI

    config = load_config(path)
    require_network(config, "hpctl, which works on the app's stacks")
    return config


_ARN = re.compile(r"^arn:[\w-]+:sagemaker:(?P<region>[a-z0-9-]+):\d{12}:cluster/")


def environment_region(profile: str | None) -> str | None:
    """The region the AWS CLI would use: AWS_REGION, AWS_DEFAULT_REGION, then the profile's region."""
    return os.environ.get("AWS_REGION") or configured_region(profile)


def resolve(args: Any, need_config: bool = False, need_cluster: bool = True) -> Target:
    """Cluster and region. Region: --region, else the cluster ARN's, else the environment's, else the config's."""
    cfg = None
    named = getattr(args, "config", None) or os.environ.get(CONFIG_ENV) or None
    config_path = named or DEFAULT_CONFIG
    if need_config or named or (need_cluster and not args.cluster):
        if not named and not Path(DEFAULT_CONFIG).is_file():
            way = "pass --config" if need_config else "pass --cluster or --config"
            raise UsageError(f"no config file: {way}, or set {CONFIG_ENV} to one ({DEFAULT_CONFIG} is read only in "
                             "the repository)")
        cfg = _load(config_path)
    cluster = args.cluster or (cfg.hyperpod.cluster_name if cfg is not None else "")
    arn = _ARN.match(cluster)
    if arn and args.region and args.region != arn["region"]:
        raise UsageError(f"--region {args.region} does not match the region of cluster ARN {cluster}")
    candidates = (
        ("--region", lambda: args.region),
        ("the cluster ARN", lambda: arn["region"] if arn else None),
        ("AWS_REGION, AWS_DEFAULT_REGION or the profile", lambda: environment_region(args.profile)),
        ("the config", lambda: cfg.region if cfg is not None else None),
    )
    source, region = next(((name, value) for name, get in candidates if (value := get())), ("", None))
    if not region and cfg is None and Path(DEFAULT_CONFIG).is_file():
        cfg = _load(DEFAULT_CONFIG)  # run inside the repository: the app's region
        source, region = "the config", cfg.region
    if not region:
        raise UsageError("no region: pass --region, set AWS_REGION, or pass a --config file with a region")
    return Target(cluster, region, args.profile, cfg, bool(args.cluster), source)


_DURATION = re.compile(r"^(?:\d+\s*[smhd]?\s*)+$")
_PART = re.compile(r"(\d+)\s*([smhd]?)")
_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_duration(text: str) -> float:
    """'90' or '90s', '15m', '2h', '1d', or a sum such as '2h30m' -> seconds."""
    value = text.strip().lower()
    parts = _PART.findall(value)
    if not _DURATION.match(value) or any(unit == "" for _, unit in parts[:-1]):
        raise UsageError(f"not a duration: {text!r} (use e.g. 90s, 15m, 2h, 2h30m, 1d)")
    return float(sum(int(number) * _UNITS[unit] for number, unit in parts))


def parse_time(text: str, now: dt.datetime | None = None) -> dt.datetime:
    """A duration back from now ('2h') or an ISO 8601 timestamp (UTC if no zone)."""
    now = now or dt.datetime.now(dt.UTC)
    if _DURATION.match(text.strip().lower()):
        return now - dt.timedelta(seconds=parse_duration(text))
    try:
        value = dt.datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise UsageError(f"not a time: {text!r} (use e.g. 2h or 2025-01-31T12:00:00Z)") from None
    return value if value.tzinfo else value.replace(tzinfo=dt.UTC)
