"""The installer installs only the chart source its template was synthesized with, and only the source tree whose
SHA-256 the config pins: a commit a fork serves under the parent's URL, another host or owner, or a source passed
by whoever invokes the function is refused in one line, before anything is installed."""

from __future__ import annotations

import json
import shutil
import subprocess
import tarfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from infra.runtime.chart_installer import handler
from infra.runtime.chart_installer.handler import charts, errors, properties, protocol

from .fakes import ARCHIVE_URL, SHA, FakeAws, FakeDownloads, FakeHelm, cfn_event, git_properties, github_tarball


def create(props: dict[str, Any]) -> dict[str, Any]:
    return handler.on_event(cfn_event("Create", props), None)


# --- the digest --------------------------------------------------------------------------------


@pytest.mark.skipif(shutil.which("sha256sum") is None, reason="needs coreutils' sha256sum")
def test_the_tree_digest_is_what_the_documented_shell_line_prints(tmp_path: Path) -> None:
    with tarfile.open(fileobj=__import__("io").BytesIO(github_tarball(tmp_path))) as tar:
        tar.extractall(tmp_path / "src", filter="data")
    tree = tmp_path / "src" / f"sagemaker-hyperpod-cli-{SHA}"
    (tree / "dir with space").mkdir()
    (tree / "dir with space" / "é.txt").write_text("unicode name\n")
    (tree / "empty").mkdir()
    # The line docs/constructs/helm-releases.md gives, run as a user would.
    line = "find . -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum"
    printed = subprocess.run(["sh", "-c", line], cwd=tree, capture_output=True, text=True, check=True).stdout  # noqa: S603, S607

    assert charts.tree_digest(tree) == printed.split()[0]


def test_a_tree_that_differs_from_the_pin_is_refused_before_anything_is_installed(
        helm: FakeHelm, aws: FakeAws, github: Callable[..., None]) -> None:
    """What a fork's commit served under the parent's URL looks like: the right URL, other files."""
    aws.cluster_exists()
    github(chart_yaml="apiVersion: v2\nname: hyperpod-helm-chart\nversion: 0.1.0\n# one changed line\n")

    with pytest.raises(errors.ChartInstallerError) as raised:
        create(git_properties())

    message = str(raised.value)
    assert message.startswith(f"the source tree of {ARCHIVE_URL} has SHA-256 ")
    assert f"the config pins {git_properties()['SourceSha256']}: refused" in message
    assert helm.calls == []


def test_a_symbolic_link_in_the_source_is_refused(
        helm: FakeHelm, aws: FakeAws, github: Callable[..., None]) -> None:
    aws.cluster_exists()
    link = tarfile.TarInfo(f"sagemaker-hyperpod-cli-{SHA}/helm_chart/HyperPodHelmChart/values-link.yaml")
    link.type = tarfile.SYMTYPE
    link.linkname = "values.yaml"
    github(extra=[link])

    with pytest.raises(errors.UnsafeArchiveError, match="symbolic link, ./helm_chart/HyperPodHelmChart/values-link"):
        create(git_properties())
    assert helm.calls == []


@pytest.mark.parametrize("digest", [None, "", "ABC", "0" * 63, "A" * 64, "g" * 64])
def test_a_git_source_without_a_well_formed_digest_is_refused_before_any_download(
        helm: FakeHelm, aws: FakeAws, downloads: FakeDownloads, digest: str | None) -> None:
    with pytest.raises(errors.ChartInstallerError, match="SourceSha256"):
        create(git_properties(SourceSha256=digest))
    assert downloads.urls == []


# --- host, owner, repository -------------------------------------------------------------------


@pytest.mark.parametrize("repository", [
    "https://gitlab.com/aws/sagemaker-hyperpod-cli",
    "https://github.com.attacker.example/aws/sagemaker-hyperpod-cli",
    "https://github.com:8443/aws/sagemaker-hyperpod-cli",
    "https://user:token@github.com/aws/sagemaker-hyperpod-cli",
    "https://github.com/aws/sagemaker-hyperpod-cli#fragment",
    "https://github.com/aws/sagemaker hyperpod",
    "https://github.com/аws/sagemaker-hyperpod-cli",  # Cyrillic а
    "https://github.com/aws/sagemaker-hyperpod-cli\u200b",
])
def test_only_ascii_github_owner_and_repository_names_are_accepted(
        helm: FakeHelm, aws: FakeAws, downloads: FakeDownloads, repository: str) -> None:
    with pytest.raises(errors.ChartInstallerError) as raised:
        create(git_properties(GitRepository=repository))
    assert str(raised.value).startswith(f"property GitRepository={repository!r} must look like https://github.com/")
    assert downloads.urls == []


def test_a_non_ascii_url_is_one_line_not_a_unicode_error(downloads: FakeDownloads, tmp_path: Path) -> None:
    """download() is also what scripts/vendor_chart.py calls."""
    with pytest.raises(errors.ChartInstallerError, match="must be ASCII"):
        charts.download("https://github.com/ówner/repo/archive/x.tar.gz", tmp_path / "a",
                        charts.Deadline.after(60))
    assert downloads.urls == []


# --- the source the template allows ------------------------------------------------------------


@pytest.fixture
def real_check(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(protocol, "check_allowed_source", properties.check_allowed_source)
    for name in list(__import__("os").environ):
        if name.startswith(properties.CHART_SOURCE_ENV_PREFIX):
            monkeypatch.delenv(name)


def allow(monkeypatch: pytest.MonkeyPatch, index: int, props: dict[str, Any]) -> None:
    """What HelmInstaller.allow_source puts in the function's environment, as Lambda gives it."""
    monkeypatch.setenv(f"{properties.CHART_SOURCE_ENV_PREFIX}{index}",
                       json.dumps(properties.source_properties(props)))


def test_the_source_the_template_was_synthesized_with_is_installed(
        real_check: None, monkeypatch: pytest.MonkeyPatch, helm: FakeHelm, aws: FakeAws,
        github: Callable[..., None]) -> None:
    allow(monkeypatch, 0, {"Source": "oci", "OciChartUri": "oci://registry.example/charts/x", "ChartVersion": "1.0.0"})
    allow(monkeypatch, 1, git_properties())
    aws.cluster_exists()
    github()

    create(git_properties())

    assert "upgrade" in helm.commands()


@pytest.mark.parametrize("overrides", [
    {"GitRepository": "https://github.com/attacker/sagemaker-hyperpod-cli"},
    {"GitRevision": "f" * 40},
    {"SourceSha256": "0" * 64},
    {"ChartPath": "other/chart"},
    {"Source": "oci", "OciChartUri": "oci://attacker.example/chart", "ChartVersion": "1.0.0"},
])
def test_a_source_the_template_does_not_name_is_refused_before_aws_or_the_network(
        real_check: None, monkeypatch: pytest.MonkeyPatch, helm: FakeHelm, aws: FakeAws,
        downloads: FakeDownloads, overrides: dict[str, str]) -> None:
    allow(monkeypatch, 0, git_properties())

    with pytest.raises(errors.ChartInstallerError, match=r"^chart source Source=\S+ .* is not one this installer "
                                                         r"was deployed with \(Source=git GitRepository="):
        create(git_properties(**overrides))
    assert downloads.urls == []
    assert helm.calls == []


def test_an_installer_deployed_with_no_source_installs_nothing(
        real_check: None, helm: FakeHelm, aws: FakeAws, downloads: FakeDownloads) -> None:
    with pytest.raises(errors.ChartInstallerError, match=r"is not one this installer was deployed with \(none\)"):
        create(git_properties())
    assert downloads.urls == []
