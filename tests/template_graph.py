"""What a resource waits for in a template: its DependsOn, followed through every resource it names."""

from __future__ import annotations

from typing import Any


def waits_for(resources: dict[str, dict[str, Any]], later: str, earlier: str) -> bool:
    """True when ``later`` is created after ``earlier`` through a chain of DependsOn in one template."""
    seen: set[str] = set()
    pending = [later]
    while pending:
        current = pending.pop()
        depends = resources.get(current, {}).get("DependsOn", [])
        for name in [depends] if isinstance(depends, str) else depends:
            if name == earlier:
                return True
            if name not in seen:
                seen.add(name)
                pending.append(name)
    return False


def readiness_checks(resource: dict[str, Any]) -> list[dict[str, Any]]:
    """The checks of a Custom::HyperPodReadiness, parsed from their JSON property (tokens rendered as found)."""
    import json

    checks = resource["Properties"]["Checks"]
    if isinstance(checks, str):
        return list(json.loads(checks))
    raise AssertionError(f"checks hold an intrinsic: {checks!r}")
