"""Fixtures for the chart installer tests: every boundary (helm, downloads, AWS) is faked."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from infra.runtime.chart_installer.handler import aws_clients, charts, process, protocol
from tests.boundaries import refuse_all

from .fakes import FAKE_HELM, FAKE_KUBECTL, REGION, FakeAws, FakeDownloads, FakeHelm, github_tarball


@pytest.fixture(autouse=True)
def offline_aws(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Fake credentials and no AWS configuration files: nothing can reach a real account."""
    for name in (
        "AWS_PROFILE",
        "AWS_DEFAULT_PROFILE",
        "AWS_SESSION_TOKEN",
        "AWS_ROLE_ARN",
        "AWS_WEB_IDENTITY_TOKEN_FILE",
        "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
        "AWS_CONTAINER_CREDENTIALS_FULL_URI",
        "AWS_ENDPOINT_URL",
        "AWS_ENDPOINT_URL_STS",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAIOSFODNN7EXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY")
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("HELM_BIN", FAKE_HELM)
    monkeypatch.setenv("KUBECTL_BIN", FAKE_KUBECTL)


@pytest.fixture(autouse=True)
def any_chart_source(monkeypatch: pytest.MonkeyPatch) -> None:
    """The source each test gives is taken as one the installer was deployed with; test_source_pinning.py checks
    the real check (``properties.check_allowed_source``)."""
    monkeypatch.setattr(protocol, "check_allowed_source", lambda props, environ: None)


@pytest.fixture(autouse=True)
def hermetic(monkeypatch: pytest.MonkeyPatch) -> None:
    """A test that forgets a fake fails instead of reaching helm, the network or AWS."""
    refuse_all(monkeypatch, (process, "run"), (charts, "urlopen"), (aws_clients, "client"))


@pytest.fixture
def helm(monkeypatch: pytest.MonkeyPatch) -> FakeHelm:
    fake = FakeHelm()
    monkeypatch.setattr(process, "run", fake)
    return fake


@pytest.fixture
def downloads(monkeypatch: pytest.MonkeyPatch) -> FakeDownloads:
    fake = FakeDownloads()
    monkeypatch.setattr(charts, "urlopen", fake)
    monkeypatch.setattr(time, "sleep", fake.sleeps.append)
    return fake


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeAws]:
    fake = FakeAws()
    monkeypatch.setattr(aws_clients, "client", fake.client)
    try:
        yield fake
        fake.verify()
    finally:
        fake.close()


@pytest.fixture
def github(downloads: FakeDownloads, tmp_path: Path) -> Callable[..., None]:
    """Serves a GitHub-style archive of the chart repository for the next download."""

    def serve(**kwargs: Any) -> None:
        archive_dir = tmp_path / f"archive-{len(downloads.outcomes)}-{len(downloads.urls)}"
        archive_dir.mkdir()
        downloads.serve(github_tarball(archive_dir, **kwargs))

    return serve
