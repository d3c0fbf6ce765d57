"""`hpctl plan --plot`: goodput against the checkpoint interval, one curve per group, the chosen interval
marked. Needs matplotlib (the optional extra `plot`); imported only when a plot is asked for."""

from __future__ import annotations

from pathlib import Path

from matplotlib.figure import Figure

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


def draw(plans: list[GroupPlan], restart_hours: float, path: Path) -> None:
    # A bare Figure renders without pyplot's global state or a display.
    figure = Figure(figsize=(8, 5))
    axes = figure.subplots()
    for p in plans:
        minutes, values = curve(p, restart_hours)
        (line,) = axes.plot(minutes, values, label=f"{p.group} ({p.instances} instances)")
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
