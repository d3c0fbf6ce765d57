"""Whether the config's region offers the CloudFormation resource types its features create.

One check, ``require_offered_types``, which app.py runs on the loaded config before building the stacks: a type
the region lacks would make CloudFormation reject the whole stack at change-set creation. The data is cfn-lint's
(infra/facts/region_types.py); ``hpctl preflight`` asks CloudFormation itself (DescribeType) for the same types.
"""

from __future__ import annotations

from typing import Any

from infra.errors import ConfigError
from infra.facts.region_types import ALWAYS, FEATURE_RESOURCE_TYPES, source, unoffered


def _is_on(config: Any, key: str) -> bool:
    value = config
    for part in key.split("."):
        value = getattr(value, part, None)
    return value is True


def needed_types(config: Any) -> dict[str, tuple[str, ...]]:
    """Config key -> the resource types it creates, for what ``config`` has on (ALWAYS first)."""
    return {key: types for key, types in FEATURE_RESOURCE_TYPES.items() if key == ALWAYS or _is_on(config, key)}


def require_offered_types(config: Any) -> None:
    """Refuse, naming the first key (ALWAYS first, then the table's order) whose types the region lacks."""
    missing = unoffered(config.region)
    if not missing:  # all offered, or no data for the region (not known: left to CloudFormation and preflight)
        return
    for key, types in needed_types(config).items():
        lacking = sorted(t for t in types if t in missing)
        if not lacking:
            continue
        what = "every deployment creates" if key == ALWAYS else "this feature creates"
        fix = "use another region" if key == ALWAYS else "turn it off or use another region"
        raise ConfigError(key, config.region if key == ALWAYS else True,
                          f"region {config.region} does not offer {', '.join(lacking)}, which {what} (per "
                          f"{source(config.region)}); {fix}")
