"""The fixtures of the chart render tests (tests/contract/chart_render.py): the installer's helm and the chart."""

from tests.contract.chart_render import chart_dir, helm

__all__ = ["chart_dir", "helm"]
