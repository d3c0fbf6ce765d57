"""What both deploy-time handlers share: one Deadline class, and one way any exception becomes a one-line reason."""

from __future__ import annotations

from typing import Any

import pytest

from infra.runtime.chart_installer.handler import deadline as installer_deadline
from infra.runtime.chart_installer.handler import errors as installer_errors
from infra.runtime.chart_installer.handler import protocol
from infra.runtime.common import deadline as common_deadline
from infra.runtime.common import errors as common_errors
from infra.runtime.grafana_content import handler as grafana
from tests.boundaries import refuse_all
from tests.chart_installer.fakes import cfn_event, git_properties
from tests.grafana_content.fakes import event as grafana_event


class Context:
    def __init__(self, seconds: float) -> None:
        self.millis = int(seconds * 1000)

    def get_remaining_time_in_millis(self) -> int:
        return self.millis


@pytest.fixture(autouse=True)
def no_boundary(monkeypatch: pytest.MonkeyPatch) -> None:
    """Neither handler may reach AWS, helm or the network here: the failures below come before any call."""
    refuse_all(monkeypatch, (grafana, "send"), (grafana, "aws_client"), (protocol, "describe_cluster"))


def test_both_handlers_keep_time_with_the_one_deadline_class() -> None:
    assert installer_deadline.Deadline is common_deadline.Deadline
    assert grafana.Deadline is common_deadline.Deadline
    assert type(installer_deadline.lambda_deadline(Context(60))) is common_deadline.Deadline
    assert installer_errors.DeadlineExceededError is common_errors.DeadlineExceededError


def test_both_handlers_fail_with_the_shared_deadline_error_when_no_time_is_left() -> None:
    with pytest.raises(common_errors.DeadlineExceededError, match="ran out of time before going on"):
        protocol.on_event(cfn_event("Delete", git_properties(), physical_id="kube-system/hyperpod-dependencies"),
                          Context(installer_deadline.DEADLINE_MARGIN_SECONDS + 5))
    with pytest.raises(common_errors.DeadlineExceededError, match="ran out of time before downloading"):
        grafana.on_event(grafana_event("Create"), Context(grafana.DEADLINE_MARGIN_SECONDS))


def test_the_deadline_keeps_its_margin_and_refuses_a_step_shorter_than_its_minimum() -> None:
    deadline = common_deadline.Deadline.of(Context(100), fallback_seconds=900, margin=20, minimum_step=30)
    assert 79 < deadline.seconds_left() <= 80
    assert 34 < deadline.seconds_left(keep=45) <= 35
    with pytest.raises(common_errors.DeadlineExceededError, match="before the upgrade"):
        deadline.seconds_left(keep=51, before="the upgrade")
    without_context = common_deadline.Deadline.of(None, fallback_seconds=900, margin=20)
    assert 879 < without_context.remaining() <= 880


def test_an_unexpected_exception_becomes_one_line_in_both_handlers(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("first line\n  second line\n")

    monkeypatch.setattr(protocol, "install", boom)
    monkeypatch.setattr(grafana, "provision", boom)
    for call in (lambda: protocol.on_event(cfn_event("Create", git_properties()), Context(600)),
                 lambda: grafana.on_event(grafana_event("Create"), Context(300))):
        with pytest.raises(common_errors.DeployError) as raised:
            call()
        assert str(raised.value) == "RuntimeError: first line second line"
        assert isinstance(raised.value.__cause__, RuntimeError)  # the log keeps the original trace


def test_a_handler_error_keeps_its_type_and_its_message_on_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    def not_found(*args: Any, **kwargs: Any) -> Any:
        raise installer_errors.ClusterNotFoundError("EKS cluster demo\nnot found")

    monkeypatch.setattr(protocol, "install", not_found)
    with pytest.raises(installer_errors.ClusterNotFoundError) as raised:
        protocol.on_event(cfn_event("Create", git_properties()), Context(600))
    assert str(raised.value) == "EKS cluster demo not found"


def test_a_long_reason_keeps_its_start_and_its_last_words() -> None:
    stderr = "\n".join(f"line {n}: noise" for n in range(2000)) + "\nError: UPGRADE FAILED: the cause"
    reason = common_errors.failure_reason(installer_errors.ChartInstallerError(f"helm upgrade failed: {stderr}"))
    assert len(reason) == common_errors.REASON_CHARS
    assert reason.startswith("helm upgrade failed: line 0: noise")
    assert reason.endswith("Error: UPGRADE FAILED: the cause")
    assert "\n" not in reason
