"""Every test runs under a time limit (pyproject.toml: tool.pytest.ini_options), so a hang ends the run."""

from __future__ import annotations

import pytest


def test_every_test_has_a_time_limit_that_reports_all_stacks(request: pytest.FixtureRequest):
    config = request.config
    assert config.pluginmanager.hasplugin("timeout"), "pytest-timeout is not installed"
    assert 0 < float(config.getini("timeout")) <= 600
    # The signal method fails the test with every thread's stack; the thread method ends an xdist worker silently.
    assert config.getini("timeout_method") == "signal"
