"""Which cluster, region and profile a command talks to: from --cluster/--region or the app's config file."""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hpctl.aws import new_session
from hpctl.errors import UsageError

DEFAULT_CONFIG = "config/default.yaml"


@dataclass
class Target:
    cluster: str  # HyperPod cluster name or ARN
    region: str
    profile: str | None
    cfg: Any  # infra.config.AppConfig, or None when --cluster and --region were enough
    explicit_cluster: bool


def _load(path: str) -> Any:
    from infra.config import load_config  # ConfigError is turned into exit 2 by the CLI

    return load_config(path)


def resolve(args: Any, need_config: bool = False) -> Target:
    cfg = None
    config_path = getattr(args, "config", None) or DEFAULT_CONFIG
    explicit_config = getattr(args, "config", None) is not None
    if (
        need_config
        or not args.cluster
        or (not args.region and (explicit_config or Path(config_path).is_file()))
    ):
        cfg = _load(config_path)
    cluster = args.cluster or cfg.hyperpod.cluster_name
    region = args.region or (cfg.region if cfg is not None else None)
    if region is None:
        region = new_session(args.profile, None).region_name
    if not region:
        raise UsageError("no region: pass --region, or a --config file with a region")
    return Target(cluster, region, args.profile, cfg, bool(args.cluster))


_DURATION = re.compile(r"^(\d+)\s*([smhd]?)$")
_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_duration(text: str) -> float:
    """'90' or '90s', '15m', '2h', '1d' -> seconds."""
    match = _DURATION.match(text.strip().lower())
    if not match:
        raise UsageError(f"not a duration: {text!r} (use e.g. 90s, 15m, 2h, 1d)")
    return float(int(match.group(1)) * _UNITS[match.group(2)])


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
