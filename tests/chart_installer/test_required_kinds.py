"""RequiredKinds: the installer waits, within limits, for kinds another party's CRDs define, then installs."""

from __future__ import annotations

import json
import time
from collections.abc import Callable

import pytest

from infra.runtime.chart_installer import handler
from infra.runtime.chart_installer.handler import errors, kinds

from .fakes import FakeAws, FakeDownloads, FakeHelm, cfn_event, git_properties

KINDS = ["karpenter.sagemaker.amazonaws.com/v1/HyperpodNodeClass", "karpenter.sh/v1/NodePool"]
NOT_FOUND = (1, "", 'Error from server (NotFound): the server could not find the requested resource\n')


class Clock:
    """time.monotonic that moves only when the code under test sleeps."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.sleeps: list[float] = []

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch, downloads: FakeDownloads) -> Clock:
    fake = Clock()
    monkeypatch.setattr(time, "monotonic", fake.monotonic)
    monkeypatch.setattr(time, "sleep", fake.sleep)
    return fake


def api_server(helm: FakeHelm, serves_after: dict[str, int]) -> Callable[[], tuple[int, str, str]]:
    """Answers `kubectl get --raw /apis/<group>/<version>`: 404 for the first N asks of a group/version, then
    an APIResourceList with its kind (and another, as a real server lists several)."""
    asked: dict[str, int] = {}
    kind_of = {k.rpartition("/")[0]: k.rpartition("/")[2] for k in KINDS}

    def answer() -> tuple[int, str, str]:
        args = helm.calls[-1].args
        assert args[1:3] == ["get", "--raw"], args
        group_version = args[3].removeprefix("/apis/")
        asked[group_version] = asked.get(group_version, 0) + 1
        if asked[group_version] <= serves_after[group_version]:
            return NOT_FOUND
        listed = {"kind": "APIResourceList", "groupVersion": group_version,
                  "resources": [{"name": "x", "kind": kind_of[group_version]}, {"name": "y", "kind": "Other"}]}
        return 0, json.dumps(listed), ""

    return answer


def create(**props: object) -> dict[str, object]:
    return handler.on_event(cfn_event("Create", git_properties(RequiredKinds=json.dumps(KINDS), **props)), None)


def test_installs_once_every_kind_is_served(helm: FakeHelm, aws: FakeAws, github, clock: Clock) -> None:
    aws.cluster_exists()
    github()
    helm.results["kubectl"] = api_server(helm, {"karpenter.sagemaker.amazonaws.com/v1": 3, "karpenter.sh/v1": 1})
    create()
    commands = helm.commands()
    assert commands.index("upgrade") > max(i for i, c in enumerate(commands) if c == "kubectl")
    assert clock.sleeps == [kinds.KINDS_POLL_SECONDS] * 3
    asked = [c.args[3] for c in helm.calls if c.command == "kubectl"]
    # A kind once served is not asked for again.
    assert asked.count("/apis/karpenter.sh/v1") == 2 and asked.count("/apis/karpenter.sagemaker.amazonaws.com/v1") == 4


def test_gives_up_after_the_wait_limit_and_installs_nothing(helm: FakeHelm, aws: FakeAws, github, clock: Clock) -> None:
    aws.cluster_exists()
    github()
    helm.results["kubectl"] = api_server(helm, {"karpenter.sagemaker.amazonaws.com/v1": 10**6, "karpenter.sh/v1": 0})
    with pytest.raises(errors.ChartInstallerError,
                       match=r"does not serve karpenter.sagemaker.amazonaws.com/v1/HyperpodNodeClass after 4\d\d s"):
        create()
    assert "upgrade" not in helm.commands() and "history" not in helm.commands()
    assert sum(clock.sleeps) <= kinds.KINDS_WAIT_SECONDS


def test_stops_waiting_when_the_install_would_lose_its_reserve(helm: FakeHelm, aws: FakeAws, github,
                                                              clock: Clock) -> None:
    aws.cluster_exists()
    github()
    helm.results["kubectl"] = api_server(helm, {"karpenter.sagemaker.amazonaws.com/v1": 10**6, "karpenter.sh/v1": 0})

    class Context:
        def get_remaining_time_in_millis(self) -> int:
            return 6 * 60 * 1000  # less than the wait limit plus the install's reserve

    with pytest.raises(errors.ChartInstallerError):
        handler.on_event(cfn_event("Create", git_properties(RequiredKinds=json.dumps(KINDS))), Context())
    assert "upgrade" not in helm.commands()
    assert sum(clock.sleeps) < 6 * 60 - kinds.INSTALL_RESERVE_SECONDS


@pytest.mark.parametrize("raw", ["not json", json.dumps({"a": 1}), json.dumps(["karpenter.sh/NodePool"]),
                                 json.dumps(["Karpenter.sh/v1/NodePool"]), json.dumps(["karpenter.sh/v1/nodepool"])])
def test_malformed_required_kinds_are_refused_before_anything_runs(helm: FakeHelm, raw: str) -> None:
    with pytest.raises(errors.ChartInstallerError, match="RequiredKinds"):
        handler.on_event(cfn_event("Create", git_properties(RequiredKinds=raw)), None)
    assert helm.calls == []


def test_without_required_kinds_nothing_is_asked(helm: FakeHelm, aws: FakeAws, github, downloads) -> None:
    aws.cluster_exists()
    github()
    handler.on_event(cfn_event("Create", git_properties()), None)
    assert not any(c.command == "kubectl" and "--raw" in c.args for c in helm.calls)


def test_a_failure_other_than_not_found_fails_at_once(helm: FakeHelm, aws: FakeAws, github, clock: Clock) -> None:
    aws.cluster_exists()
    github()
    helm.results["kubectl"] = (1, "", 'Error from server (Forbidden): forbidden: User "installer" cannot get path '
                                      '"/apis/karpenter.sagemaker.amazonaws.com/v1"\n')
    with pytest.raises(errors.ChartInstallerError, match=r"get --raw /apis/karpenter.sagemaker.amazonaws.com/v1 "
                                                         r"failed: .*Forbidden"):
        create()
    assert clock.sleeps == [] and "upgrade" not in helm.commands()


def test_an_answer_that_is_not_a_resource_list_is_refused(helm: FakeHelm, aws: FakeAws, github, clock) -> None:
    aws.cluster_exists()
    github()
    helm.results["kubectl"] = (0, "[]", "")
    with pytest.raises(errors.ChartInstallerError, match="printed no APIResourceList"):
        create()


def test_every_discovery_request_has_its_own_time_limit(helm: FakeHelm, aws: FakeAws, github, clock) -> None:
    aws.cluster_exists()
    github()
    helm.results["kubectl"] = api_server(helm, {"karpenter.sagemaker.amazonaws.com/v1": 0, "karpenter.sh/v1": 0})
    create()
    assert all("--request-timeout=20s" in c.args for c in helm.calls if c.command == "kubectl")


def delete(helm: FakeHelm) -> dict[str, object]:
    props = git_properties(RequiredKinds=json.dumps(KINDS), ReleaseName="hyperpod-karpenter-node-pools")
    return handler.on_event(cfn_event("Delete", props, "kube-system/hyperpod-karpenter-node-pools"), None)


def test_delete_after_the_kinds_are_gone_forgets_the_release(helm: FakeHelm, aws: FakeAws, clock) -> None:
    # Autoscaling was disabled and HyperPod's Karpenter CRDs went with it: helm uninstall could not build the
    # objects, so only helm's record of the release (its Secrets) is deleted.
    aws.cluster_exists()
    helm.results["kubectl"] = lambda: (
        (0, "", "") if helm.calls[-1].args[1] == "delete" else
        api_server(helm, {"karpenter.sagemaker.amazonaws.com/v1": 10**6, "karpenter.sh/v1": 0})())
    assert delete(helm) == {"PhysicalResourceId": "kube-system/hyperpod-karpenter-node-pools"}
    assert "uninstall" not in helm.commands()
    (forget,) = [c.args for c in helm.calls if c.command == "kubectl" and c.args[1] == "delete"]
    assert forget[1:8] == ["delete", "secret", "--namespace", "kube-system", "--selector",
                           "owner=helm,name=hyperpod-karpenter-node-pools", "--ignore-not-found"]
    assert clock.sleeps == []


def test_delete_while_the_kinds_are_served_uninstalls(helm: FakeHelm, aws: FakeAws, clock) -> None:
    aws.cluster_exists()
    helm.results["kubectl"] = api_server(helm, {"karpenter.sagemaker.amazonaws.com/v1": 0, "karpenter.sh/v1": 0})
    delete(helm)
    assert helm.commands().count("uninstall") == 1
    assert not any(c.command == "kubectl" and c.args[1] == "delete" for c in helm.calls)
