"""`hpctl plan --plot`: goodput against the checkpoint interval, one curve per distinct group plan (groups with the
same figures share one curve and one label), the chosen interval marked. Needs matplotlib (the optional extra `plot`),
imported only when a plot is drawn."""

from __future__ import annotations

from pathlib import Path

from hpctl.plan import GroupPlan, goodput

POINTS = 200
# The curve spans this factor below and above the chosen interval, on a log axis.
SPAN = 20


def curve(p: GroupPlan, restart_hours: float) -> tuple[list[float], list[float]]:
    """(interval in minutes, goodput) around the group's chosen interval."""
    c, m = p.checkpoint_write_seconds / 3600, p.mtbf_hours
    low = p.checkpoint_interval_minutes / SPAN
    minutes = [low * (SPAN * SPAN) ** (i / (POINTS - 1)) for i in range(POINTS)]
    return minutes, [goodput(x / 60, c, m, restart_hours) for x in minutes]


def _instances(count: int) -> str:
    return f"{count} instance" if count == 1 else f"{count} instances"


def curves(plans: list[GroupPlan]) -> list[tuple[str, GroupPlan]]:
    """(legend label, plan) per distinct curve: groups whose figures are the same would draw the same curve on top
    of each other, so they share one, labelled with every group's name."""
    shared: dict[tuple[float, float, float], list[GroupPlan]] = {}
    for p in plans:
        shared.setdefault((p.mtbf_hours, p.checkpoint_write_seconds, p.checkpoint_interval_minutes), []).append(p)
    labelled = []
    for same in shared.values():
        names = ", ".join(p.group for p in same)
        sizes = sorted({p.instances for p in same})
        size = _instances(sizes[0]) if len(sizes) == 1 else " or ".join(map(str, sizes)) + " instances"
        labelled.append((f"{names} ({size}{' each' if len(same) > 1 else ''})", same[0]))
    return labelled


def draw(plans: list[GroupPlan], restart_hours: float, path: Path) -> None:
    from matplotlib.figure import Figure  # the plot extra

    # A bare Figure renders without pyplot's global state or a display.
    figure = Figure(figsize=(8, 5))
    axes = figure.subplots()
    for label, p in curves(plans):
        minutes, values = curve(p, restart_hours)
        (line,) = axes.plot(minutes, values, label=label)
        axes.plot([p.checkpoint_interval_minutes], [p.goodput], "o", color=line.get_color())
        axes.annotate(
            f"{p.checkpoint_interval_minutes:.0f} min, {p.goodput:.1%}",
            (p.checkpoint_interval_minutes, p.goodput),
            textcoords="offset points",
            xytext=(8, -16),  # below the point: it is the top of its curve
        )
    axes.set_xscale("log")
    axes.set_xlabel("checkpoint interval (minutes)")
    axes.set_ylabel("goodput")
    axes.set_title("hpctl plan: goodput against the checkpoint interval")
    axes.grid(True, which="both", alpha=0.3)
    axes.legend()
    figure.savefig(path)
