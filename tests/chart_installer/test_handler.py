"""Unit tests of the Helm chart installer custom resource handler (no network, no AWS, no helm)."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import re
import subprocess
import sys
import tarfile
import time
import zipfile
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.error import HTTPError
from urllib.parse import parse_qs, urlparse

import pytest

from infra.runtime.chart_installer import handler
from infra.runtime.chart_installer.handler import charts, cluster, deadline, errors, process
from infra.runtime.chart_installer.handler import helm as helm_module
from infra.runtime.chart_installer.handler.process import run as real_run  # before any test fakes it

from .fakes import (
    ARCHIVE_URL,
    CLUSTER,
    REGION,
    SHA,
    FakeAws,
    FakeDownloads,
    FakeHelm,
    cfn_event,
    git_properties,
    revisions,
    tarball_sha256,
)

PHYSICAL_ID = "kube-system/hyperpod-dependencies"


def create(props: dict[str, object] | None = None) -> dict[str, object]:
    return handler.on_event(cfn_event("Create", props or git_properties()), None)


# --- create / update ---------------------------------------------------------------------------


def test_create_builds_dependencies_then_installs_in_kube_system(
    helm: FakeHelm, aws: FakeAws, github: Callable[..., None], downloads: FakeDownloads
) -> None:
    aws.cluster_exists()
    github()

    response = create()

    assert downloads.urls == [ARCHIVE_URL]
    assert helm.commands() == ["dependency", "history", "upgrade", "status"]
    build = helm.only("dependency")
    assert build.args[2] == "build"
    assert build.args[3].endswith(f"sagemaker-hyperpod-cli-{SHA}/helm_chart/HyperPodHelmChart")
    upgrade = helm.only("upgrade")
    assert upgrade.args[2:5] == ["--install", "hyperpod-dependencies", build.args[3]]
    assert upgrade.option("--namespace") == "kube-system"
    assert "--wait" in upgrade.args
    assert upgrade.option("--timeout") == "10m"
    assert upgrade.option("--history-max") == "5"
    assert upgrade.chart_yaml_present
    assert upgrade.values == {
        "mpi-operator": {"enabled": True},
        "health-monitoring-agent": {"region": REGION},
    }
    assert helm.only("status").option("--namespace") == "kube-system"
    assert response == {
        "PhysicalResourceId": PHYSICAL_ID,
        "Data": {"Release": "hyperpod-dependencies", "Namespace": "kube-system", "Revision": "3"},
    }


def test_values_keep_a_given_agent_region_and_accept_an_object(
    helm: FakeHelm, aws: FakeAws, github: Callable[..., None]
) -> None:
    aws.cluster_exists()
    github()
    values = {"health-monitoring-agent": {"region": "eu-west-1", "enabled": True}, "x": 1}

    create(git_properties(Values=values, TimeoutMinutes="5"))

    upgrade = helm.only("upgrade")
    assert upgrade.values == values
    assert upgrade.option("--timeout") == "5m"


def test_update_with_same_properties_upgrades_in_place(
    helm: FakeHelm, aws: FakeAws, github: Callable[..., None]
) -> None:
    aws.cluster_exists()
    github()
    helm.history = revisions("superseded", "deployed")

    response = handler.on_event(cfn_event("Update", git_properties(), PHYSICAL_ID), None)

    assert response["PhysicalResourceId"] == PHYSICAL_ID
    assert helm.commands() == ["dependency", "history", "template", "upgrade", "status"]
    assert helm.only("upgrade").args[2:4] == ["--install", "hyperpod-dependencies"]


def test_update_renaming_the_release_installs_it_under_a_new_physical_id(
    helm: FakeHelm, aws: FakeAws, github: Callable[..., None]
) -> None:
    aws.cluster_exists()
    github()
    props = git_properties(ReleaseName="hyperpod-dependencies-v2")

    response = handler.on_event(cfn_event("Update", props, PHYSICAL_ID), None)

    assert response["PhysicalResourceId"] == "kube-system/hyperpod-dependencies-v2"
    assert helm.only("upgrade").args[3] == "hyperpod-dependencies-v2"
    assert "uninstall" not in helm.commands()


def test_chart_without_dependencies_skips_dependency_build(
    helm: FakeHelm, aws: FakeAws, github: Callable[..., None]
) -> None:
    aws.cluster_exists()
    plain = "apiVersion: v2\nname: plain\nversion: 0.1.0\ndependencies: []\n"
    github(chart_yaml=plain)

    create(git_properties(SourceSha256=tarball_sha256(chart_yaml=plain)))

    assert helm.commands() == ["history", "upgrade", "status"]


def test_failed_upgrade_raises_with_helm_stderr(
    helm: FakeHelm, aws: FakeAws, github: Callable[..., None]
) -> None:
    aws.cluster_exists()
    github()
    helm.history = revisions("deployed")
    helm.results["upgrade"] = (1, "", "Error: UPGRADE FAILED: context deadline exceeded\n")

    with pytest.raises(errors.ChartInstallerError, match="UPGRADE FAILED: context deadline exceeded"):
        handler.on_event(cfn_event("Update", git_properties(), PHYSICAL_ID), None)
    # helm marked the revision failed; the release stays for CloudFormation's rollback to upgrade again.
    assert "uninstall" not in helm.commands()
    assert "status" not in helm.commands()


def test_failed_dependency_build_raises_before_install(
    helm: FakeHelm, aws: FakeAws, github: Callable[..., None]
) -> None:
    aws.cluster_exists()
    github()
    helm.results["dependency"] = (1, "", "Error: could not download oci://quay.io/jetstack/charts\n")

    with pytest.raises(errors.ChartInstallerError, match="dependency build .*could not download"):
        create()
    assert helm.commands() == ["dependency"]


def test_unreadable_status_still_succeeds_without_revision(
    helm: FakeHelm, aws: FakeAws, github: Callable[..., None]
) -> None:
    aws.cluster_exists()
    github()
    helm.results["status"] = (1, "", "Error: boom\n")

    response = create()

    assert response["Data"] == {"Release": "hyperpod-dependencies", "Namespace": "kube-system"}


def test_create_fails_clearly_when_the_cluster_does_not_exist(
    helm: FakeHelm, aws: FakeAws, downloads: FakeDownloads
) -> None:
    aws.cluster_missing()

    with pytest.raises(errors.ClusterNotFoundError, match=CLUSTER):
        create()
    assert helm.calls == []
    assert downloads.urls == []


# --- delete ------------------------------------------------------------------------------------


def test_delete_uninstalls_with_namespace(helm: FakeHelm, aws: FakeAws) -> None:
    aws.cluster_exists()

    response = handler.on_event(cfn_event("Delete", git_properties(), PHYSICAL_ID), None)

    assert response == {"PhysicalResourceId": PHYSICAL_ID, "Data": {"Uninstall": "helm uninstall: done"}}
    uninstall = helm.only("uninstall")
    assert uninstall.args[2] == "hyperpod-dependencies"
    assert uninstall.option("--namespace") == "kube-system"
    # Without --wait: pods still holding a volume must not hold the delete past the Lambda's limit.
    assert "--wait" not in uninstall.args
    assert "--no-hooks" not in uninstall.args
    # The hooked try keeps time back for the fallbacks.
    left = deadline.FUNCTION_TIMEOUT_SECONDS - deadline.DEADLINE_MARGIN_SECONDS
    assert uninstall.timeout <= left - deadline.UNINSTALL_FALLBACK_RESERVE_SECONDS + 1


def test_delete_targets_the_release_named_by_the_physical_id(helm: FakeHelm, aws: FakeAws) -> None:
    aws.cluster_exists()
    props = git_properties(ReleaseName="renamed", Namespace="other")

    handler.on_event(cfn_event("Delete", props, PHYSICAL_ID), None)

    uninstall = helm.only("uninstall")
    assert uninstall.args[2] == "hyperpod-dependencies"
    assert uninstall.option("--namespace") == "kube-system"


def test_delete_with_a_foreign_physical_id_falls_back_to_the_properties(helm: FakeHelm, aws: FakeAws) -> None:
    aws.cluster_exists()

    handler.on_event(cfn_event("Delete", git_properties(), "not-a-release-id"), None)

    assert helm.only("uninstall").args[2] == "hyperpod-dependencies"


def test_delete_of_a_release_that_is_not_installed_succeeds(helm: FakeHelm, aws: FakeAws) -> None:
    aws.cluster_exists()
    helm.results["uninstall"] = (
        1,
        "",
        "Error: uninstall: Release not loaded: hyperpod-dependencies: release: not found\n",
    )

    response = handler.on_event(cfn_event("Delete", git_properties(), PHYSICAL_ID), None)

    assert response == {"PhysicalResourceId": PHYSICAL_ID, "Data": {"Uninstall": "helm uninstall: not installed"}}
    assert helm.commands() == ["uninstall"]


HOOK_TIMEOUT = ("Error: 1 error occurred:\n\t* pre-delete hook job hyperpod-cleanup: timed out waiting for the "
                "condition\n")


def answers(*outcomes: tuple[int, str, str] | Exception) -> Callable[[], tuple[int, str, str]]:
    """A FakeHelm result giving each outcome in turn."""
    queue = list(outcomes)

    def next_answer() -> tuple[int, str, str]:
        outcome = queue.pop(0)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    return next_answer


def test_a_delete_whose_hook_cannot_run_falls_back_to_an_uninstall_without_hooks(
        helm: FakeHelm, aws: FakeAws) -> None:
    aws.cluster_exists()
    helm.results["uninstall"] = answers((1, "", HOOK_TIMEOUT), (0, "release uninstalled", ""))

    response = handler.on_event(cfn_event("Delete", git_properties(), PHYSICAL_ID), None)

    first, second = [call for call in helm.calls if call.command == "uninstall"]
    assert "--no-hooks" not in first.args and "--no-hooks" in second.args
    assert "--wait" not in second.args
    steps = response["Data"]["Uninstall"]  # type: ignore[index]
    assert steps.startswith("helm uninstall failed (exit 1): Error: 1 error occurred: * pre-delete hook job")
    assert steps.endswith("| helm uninstall --no-hooks: done")


@pytest.mark.parametrize("first", [
    (1, "", HOOK_TIMEOUT),
    errors.DeadlineExceededError("helm uninstall was stopped after 600 s, the time left to this invocation"),
])
def test_a_delete_that_cannot_uninstall_deletes_helms_record_of_the_release(
        helm: FakeHelm, aws: FakeAws, first: tuple[int, str, str] | Exception) -> None:
    aws.cluster_exists()
    helm.results["uninstall"] = answers(first, (1, "", "Error: Kubernetes cluster unreachable\n"))

    response = handler.on_event(cfn_event("Delete", git_properties(), PHYSICAL_ID), None)

    assert helm.commands() == ["uninstall", "uninstall", "kubectl"]
    forget = helm.only("kubectl")
    assert forget.args[1:8] == ["delete", "secret", "--namespace", "kube-system", "--selector",
                                "owner=helm,name=hyperpod-dependencies", "--ignore-not-found"]
    steps = response["Data"]["Uninstall"]  # type: ignore[index]
    assert "helm uninstall --no-hooks failed (exit 1): Error: Kubernetes cluster unreachable" in steps
    assert steps.endswith("deleted helm's record of the release; its objects that remain are left to the cluster")


def test_a_delete_that_fails_every_step_says_in_one_line_what_was_tried_and_what_to_do(
        helm: FakeHelm, aws: FakeAws) -> None:
    aws.cluster_exists()
    unreachable = (1, "", "Error: Kubernetes cluster unreachable: the server has asked for the client to provide "
                          "credentials\n")
    helm.results["uninstall"] = unreachable
    helm.results["kubectl"] = (1, "", "error: You must be logged in to the server (Unauthorized)\n")

    with pytest.raises(errors.ChartInstallerError) as raised:
        handler.on_event(cfn_event("Delete", git_properties(), PHYSICAL_ID), None)

    message = str(raised.value)
    assert "\n" not in message
    assert message.startswith("kube-system/hyperpod-dependencies was not removed: helm uninstall failed (exit 1)")
    assert "helm uninstall --no-hooks failed" in message and "Unauthorized" in message
    assert "By hand: helm uninstall hyperpod-dependencies --namespace kube-system --no-hooks" in message
    assert "--retain-resources" in message


def test_a_delete_the_installer_may_not_describe_the_cluster_for_is_one_line_saying_what_to_do(
        helm: FakeHelm, aws: FakeAws) -> None:
    aws.eks_stub.add_client_error(
        "describe_cluster", service_error_code="AccessDeniedException", http_status_code=403,
        service_message="User: arn:aws:sts::111122223333:assumed-role/installer/fn is not authorized to perform: "
                        "eks:DescribeCluster on resource: arn:aws:eks:us-west-2:111122223333:cluster/hyperpod-eks",
        expected_params={"name": CLUSTER})

    with pytest.raises(errors.ChartInstallerError,
                       match=r"^the installer's role may not call eks:DescribeCluster on hyperpod-eks in us-west-2 "
                             r"\(AccessDeniedException: User: .*\): give it back its DescribeThisCluster .*"
                             r"--retain-resources"):
        handler.on_event(cfn_event("Delete", git_properties(), PHYSICAL_ID), None)
    assert helm.calls == []


def test_delete_when_the_cluster_is_gone_succeeds_without_helm(helm: FakeHelm, aws: FakeAws) -> None:
    aws.cluster_missing()

    response = handler.on_event(cfn_event("Delete", git_properties(), PHYSICAL_ID), None)

    assert response == {"PhysicalResourceId": PHYSICAL_ID}
    assert helm.calls == []


def test_delete_does_not_validate_the_chart_source(helm: FakeHelm, aws: FakeAws) -> None:
    aws.cluster_exists()
    props = git_properties(GitRevision="main", Source="unknown")

    handler.on_event(cfn_event("Delete", props, PHYSICAL_ID), None)

    assert helm.commands() == ["uninstall"]


def test_unknown_request_type_raises() -> None:
    with pytest.raises(errors.ChartInstallerError, match="RequestType"):
        handler.on_event(cfn_event("Replace", git_properties()), None)


# --- property validation -----------------------------------------------------------------------


@pytest.mark.parametrize("revision", ["main", "v1.0.0", SHA[:12], SHA + "0", "g" * 40, ""])
def test_a_revision_that_is_not_a_commit_sha_is_refused_before_any_download(
    helm: FakeHelm, aws: FakeAws, downloads: FakeDownloads, revision: str
) -> None:
    with pytest.raises(errors.ChartInstallerError, match="GitRevision"):
        create(git_properties(GitRevision=revision))
    assert downloads.urls == []
    assert helm.calls == []


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"GitRepository": "http://github.com/aws/sagemaker-hyperpod-cli"}, "GitRepository"),
        ({"GitRepository": "https://github.com/aws"}, "GitRepository"),
        ({"GitRepository": "https://token@github.com/aws/sagemaker-hyperpod-cli"}, "GitRepository"),
        ({"ChartPath": "../outside"}, "ChartPath"),
        ({"ChartPath": "/abs"}, "ChartPath"),
        ({"ReleaseName": "Bad_Name"}, "ReleaseName"),
        ({"ReleaseName": "--set=x"}, "ReleaseName"),
        ({"Namespace": "kube.system"}, "Namespace"),
        ({"TimeoutMinutes": "13"}, "TimeoutMinutes"),
        ({"TimeoutMinutes": "ten"}, "TimeoutMinutes"),
        ({"Values": "[1, 2]"}, "Values"),
        ({"Values": "{not json"}, "Values"),
        ({"Source": "helm-repo"}, "Source"),
        ({"Region": None}, "Region"),
    ],
)
def test_invalid_properties_are_refused_before_touching_aws_or_the_network(
    helm: FakeHelm, aws: FakeAws, downloads: FakeDownloads, overrides: dict[str, object], message: str
) -> None:
    with pytest.raises(errors.ChartInstallerError, match=message):
        create(git_properties(**overrides))
    assert downloads.urls == []
    assert helm.calls == []


# --- fetching ----------------------------------------------------------------------------------


def test_download_retries_transient_errors_with_backoff(
    helm: FakeHelm, aws: FakeAws, downloads: FakeDownloads, github: Callable[..., None]
) -> None:
    aws.cluster_exists()
    downloads.serve(HTTPError(ARCHIVE_URL, 503, "Service Unavailable", None, None))  # type: ignore[arg-type]
    github()

    create()

    assert downloads.urls == [ARCHIVE_URL, ARCHIVE_URL]
    assert downloads.sleeps == [2]


def test_download_does_not_retry_a_missing_commit(
    helm: FakeHelm, aws: FakeAws, downloads: FakeDownloads
) -> None:
    aws.cluster_exists()
    downloads.serve(HTTPError(ARCHIVE_URL, 404, "Not Found", None, None))  # type: ignore[arg-type]

    with pytest.raises(errors.ChartInstallerError, match="HTTP 404"):
        create()
    assert len(downloads.urls) == 1
    assert helm.calls == []


def test_download_gives_up_after_the_last_attempt(
    helm: FakeHelm, aws: FakeAws, downloads: FakeDownloads
) -> None:
    aws.cluster_exists()
    downloads.serve(*[TimeoutError("timed out")] * charts.DOWNLOAD_ATTEMPTS)

    with pytest.raises(errors.ChartInstallerError, match="timed out"):
        create()
    assert len(downloads.urls) == charts.DOWNLOAD_ATTEMPTS
    assert downloads.sleeps == [2, 4, 8]


def _member(name: str, kind: bytes = tarfile.REGTYPE, link: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = link
    info.size = 1 if kind == tarfile.REGTYPE else 0
    return info


@pytest.mark.parametrize(
    ("member", "message"),
    [
        (_member(f"sagemaker-hyperpod-cli-{SHA}/../../escaped.txt"), "points outside"),
        (_member("/etc/cron.d/escaped"), "points outside"),
        (_member(f"sagemaker-hyperpod-cli-{SHA}/link", tarfile.SYMTYPE, "/etc/passwd"), "absolute"),
        (_member(f"sagemaker-hyperpod-cli-{SHA}/link", tarfile.SYMTYPE, "../../../etc/passwd"), "outside"),
    ],
    ids=["dotdot", "absolute", "absolute-symlink", "escaping-symlink"],
)
def test_a_tarball_with_a_path_traversal_member_is_refused(
    helm: FakeHelm,
    aws: FakeAws,
    github: Callable[..., None],
    member: tarfile.TarInfo,
    message: str,
) -> None:
    aws.cluster_exists()
    github(extra=[member])

    with pytest.raises(errors.UnsafeArchiveError, match=message):
        create()
    assert helm.calls == []


def test_missing_chart_yaml_is_a_clear_error(
    helm: FakeHelm, aws: FakeAws, github: Callable[..., None]
) -> None:
    aws.cluster_exists()
    github(chart_yaml=None)

    with pytest.raises(
        errors.ChartInstallerError, match=r"no Chart\.yaml at 'helm_chart/HyperPodHelmChart'"
    ):
        create(git_properties(SourceSha256=tarball_sha256(chart_yaml=None)))
    assert helm.calls == []


def test_oci_source_pulls_the_pinned_version(helm: FakeHelm, aws: FakeAws, downloads: FakeDownloads) -> None:
    aws.cluster_exists()
    props = git_properties(
        Source="oci",
        OciChartUri="oci://public.ecr.aws/example/hyperpod-deps",
        ChartVersion="1.2.3",
        GitRepository=None,
        GitRevision=None,
        ChartPath=None,
    )

    response = create(props)

    assert helm.commands() == ["pull", "history", "upgrade", "status"]
    pull = helm.only("pull")
    assert pull.args[2] == "oci://public.ecr.aws/example/hyperpod-deps"
    assert pull.option("--version") == "1.2.3"
    assert "--untar" in pull.args
    upgrade = helm.only("upgrade")
    assert upgrade.args[4].startswith(pull.option("--untardir"))
    assert upgrade.chart_yaml_present
    assert downloads.urls == []
    assert response["PhysicalResourceId"] == PHYSICAL_ID


@pytest.mark.parametrize("version", [None, "", "^1.2.0", "1.x", ">=1.0.0", "latest"])
def test_oci_source_requires_an_exact_version(helm: FakeHelm, aws: FakeAws, version: str | None) -> None:
    props = git_properties(Source="oci", OciChartUri="oci://public.ecr.aws/example/c", ChartVersion=version)

    with pytest.raises(errors.ChartInstallerError, match="ChartVersion"):
        create(props)
    assert helm.calls == []


def _chart_zip(members: dict[str, str]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as bundle:
        for name, text in members.items():
            bundle.writestr(name, text)
    return buffer.getvalue()


def test_s3_source_downloads_and_unzips_the_asset(helm: FakeHelm, aws: FakeAws) -> None:
    aws.cluster_exists()
    aws.s3_object(
        "cdk-assets",
        "abc123.zip",
        _chart_zip(
            {"Chart.yaml": "apiVersion: v2\nname: local\nversion: 0.1.0\n", "templates/cm.yaml": "{}"}
        ),
    )
    props = git_properties(Source="s3", AssetBucket="cdk-assets", AssetKey="abc123.zip", ChartPath=None)

    create(props)

    assert helm.commands() == ["history", "upgrade", "status"]
    assert helm.only("upgrade").chart_yaml_present


def test_s3_asset_with_a_path_traversal_member_is_refused(helm: FakeHelm, aws: FakeAws) -> None:
    aws.cluster_exists()
    aws.s3_object("cdk-assets", "evil.zip", _chart_zip({"Chart.yaml": "x", "../escaped.txt": "x"}))
    props = git_properties(Source="s3", AssetBucket="cdk-assets", AssetKey="evil.zip", ChartPath=None)

    with pytest.raises(errors.UnsafeArchiveError):
        create(props)
    assert helm.calls == []


# --- credentials -------------------------------------------------------------------------------


def test_token_is_an_eks_token_and_is_never_printed(
    helm: FakeHelm, aws: FakeAws, github: Callable[..., None], capsys: pytest.CaptureFixture[str]
) -> None:
    aws.cluster_exists()
    github()

    create()

    upgrade = helm.only("upgrade")
    assert upgrade.kubeconfig is not None
    token = upgrade.kubeconfig["users"][0]["user"]["token"]
    assert token.startswith("k8s-aws-v1.")
    encoded = token.removeprefix("k8s-aws-v1.")
    assert "=" not in encoded
    url = urlparse(base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)).decode())
    query = parse_qs(url.query)
    assert url.hostname is not None and url.hostname.startswith("sts.")
    assert query["Action"] == ["GetCallerIdentity"]
    assert query["X-Amz-Expires"] == ["60"]
    assert "x-k8s-aws-id" in query["X-Amz-SignedHeaders"][0].split(";")
    signature = query["X-Amz-Signature"][0]

    printed = capsys.readouterr()
    for secret in (token, encoded[:40], signature):
        assert secret not in printed.out
        assert secret not in printed.err
    assert "downloading " + ARCHIVE_URL in printed.out


def test_kubeconfig_is_private_and_points_at_the_cluster(
    helm: FakeHelm, aws: FakeAws, github: Callable[..., None]
) -> None:
    aws.cluster_exists()
    github()

    create()

    for call in (helm.only("upgrade"), helm.only("status")):
        assert call.kubeconfig_mode == 0o600
        assert call.kubeconfig is not None
        cluster = call.kubeconfig["clusters"][0]["cluster"]
        assert cluster["server"] == "https://0123456789ABCDEF.gr7.us-west-2.eks.amazonaws.com"
        assert call.env["KUBECONFIG"] == call.option("--kubeconfig")


def test_helm_runs_without_aws_credentials_and_with_a_writable_home(
    helm: FakeHelm, aws: FakeAws, github: Callable[..., None]
) -> None:
    aws.cluster_exists()
    github()

    create()

    for call in helm.calls:
        assert not any(name.startswith("AWS_") for name in call.env)
        assert call.env["HELM_CACHE_HOME"].startswith(call.env["HOME"])


# --- the subprocess boundary -------------------------------------------------------------------


def test_run_logs_the_command_and_returns_its_output(capsys: pytest.CaptureFixture[str]) -> None:
    result = real_run([sys.executable, "-c", "import sys; print('out'); sys.exit(3)"], {}, 30)

    assert isinstance(result, subprocess.CompletedProcess)
    assert (result.returncode, result.stdout.strip()) == (3, "out")
    printed = capsys.readouterr().out
    assert "import sys" in printed
    assert "exit 3" in printed


def test_run_is_the_only_place_a_subprocess_starts() -> None:
    sources = {path.name: path.read_text() for path in Path(handler.__file__).parent.glob("*.py")}
    assert len(sources) > 1
    assert {name: source.count("subprocess.Popen(") for name, source in sources.items() if "Popen" in source} == {
        "process.py": 1}
    for source in sources.values():
        assert "subprocess.run(" not in source
        assert "os.system" not in source


def test_bearer_token_matches_the_aws_cli_format(aws: FakeAws) -> None:
    token = cluster.bearer_token(CLUSTER, REGION)

    encoded = token.removeprefix("k8s-aws-v1.")
    url = base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)).decode()
    assert url.startswith("https://sts.")
    assert "Action=GetCallerIdentity" in url


# --- wait and the Lambda's time limit ------------------------------------------------------------


def test_wait_false_installs_without_waiting_for_workloads_but_keeps_the_timeout(
    helm: FakeHelm, aws: FakeAws, github: Callable[..., None]
) -> None:
    aws.cluster_exists()
    github()

    create({**git_properties(), "Wait": "false"})

    upgrade = helm.only("upgrade")
    assert "--wait" not in upgrade.args
    assert upgrade.option("--timeout") == "10m"


@pytest.mark.parametrize("value", ["yes", "", "1"])
def test_a_wait_that_is_not_true_or_false_is_refused(helm: FakeHelm, aws: FakeAws, value: str) -> None:
    with pytest.raises(errors.ChartInstallerError, match="property Wait"):
        create({**git_properties(), "Wait": value})
    assert helm.calls == []


class _Context:
    def __init__(self, millis: int) -> None:
        self.millis = millis

    def get_remaining_time_in_millis(self) -> int:
        return self.millis


def test_every_command_ends_before_the_lambda_and_helm_times_out_before_its_command(
    helm: FakeHelm, aws: FakeAws, github: Callable[..., None]
) -> None:
    aws.cluster_exists()
    github()
    left = 6 * 60

    handler.on_event(cfn_event("Create", git_properties()), _Context(left * 1000))

    assert helm.commands() == ["dependency", "history", "upgrade", "status"]
    for call in helm.calls:
        assert call.timeout <= left - deadline.DEADLINE_MARGIN_SECONDS
    upgrade = helm.only("upgrade")
    # A new release keeps time back to be uninstalled if its install fails.
    assert upgrade.timeout <= left - deadline.DEADLINE_MARGIN_SECONDS - deadline.CLEANUP_RESERVE_SECONDS
    minutes = int(upgrade.option("--timeout").removesuffix("m"))
    assert minutes == 3  # (360 - 45 - 90 - 15) // 60: helm's own timeout ends before the command is stopped
    assert minutes * 60 + process.TERMINATE_GRACE_SECONDS <= upgrade.timeout


def test_without_a_lambda_context_the_function_timeout_is_the_deadline(
    helm: FakeHelm, aws: FakeAws, github: Callable[..., None]
) -> None:
    aws.cluster_exists()
    github()

    create()

    for call in helm.calls:
        assert call.timeout <= deadline.FUNCTION_TIMEOUT_SECONDS - deadline.DEADLINE_MARGIN_SECONDS


def test_too_little_time_left_fails_before_running_helm(helm: FakeHelm, aws: FakeAws) -> None:
    with pytest.raises(errors.ChartInstallerError, match="too little"):
        handler.on_event(cfn_event("Delete", git_properties(), physical_id=PHYSICAL_ID), _Context(30 * 1000))
    assert "uninstall" not in helm.commands()


def test_a_download_that_outlasts_the_deadline_is_stopped() -> None:
    body = io.BytesIO(b"x" * (3 * 1024 * 1024))

    with pytest.raises(errors.DeadlineExceededError, match="did not finish"):
        charts.copy_until(body, io.BytesIO(), time.monotonic() - 1, ARCHIVE_URL)


# --- commands that run out of time ---------------------------------------------------------------


def test_run_stops_a_command_at_its_deadline() -> None:
    started = time.monotonic()

    with pytest.raises(errors.DeadlineExceededError, match="sh -c was stopped after 0 s"):  # 0.3 s, rounded
        real_run(["/bin/sh", "-c", "exec sleep 60"], {}, 0.3)
    assert time.monotonic() - started < 10


def test_run_kills_a_command_that_ignores_sigterm(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(process, "TERMINATE_GRACE_SECONDS", 0.3)
    # A signal ignored before exec stays ignored in the new program (POSIX exec): sleep itself ignores SIGTERM.
    ignores_sigterm = ["/bin/sh", "-c", "trap '' TERM; exec sleep 60"]
    started = time.monotonic()

    with pytest.raises(errors.DeadlineExceededError):
        real_run(ignores_sigterm, {}, 0.5)
    # SIGTERM was ignored for the whole grace period, then SIGKILL ended it (not sleep's 60 s).
    assert 0.8 <= time.monotonic() - started < 10


def test_an_install_stopped_at_its_deadline_is_removed_again(
    helm: FakeHelm, aws: FakeAws, github: Callable[..., None]
) -> None:
    aws.cluster_exists()
    github()
    helm.results["upgrade"] = errors.DeadlineExceededError("helm upgrade was stopped after 600 s")

    with pytest.raises(errors.DeadlineExceededError, match="stopped after 600 s"):
        create()
    assert helm.commands() == ["dependency", "history", "upgrade", "uninstall"]
    uninstall = helm.only("uninstall")
    assert "--wait" not in uninstall.args
    assert uninstall.timeout > 0


# --- a failed create ---------------------------------------------------------------------------


def test_a_failed_install_of_a_new_release_uninstalls_what_it_left(
    helm: FakeHelm, aws: FakeAws, github: Callable[..., None]
) -> None:
    aws.cluster_exists()
    github()
    helm.results["upgrade"] = (1, "", "Error: INSTALLATION FAILED: admission webhook denied the request\n")

    with pytest.raises(errors.ChartInstallerError, match="INSTALLATION FAILED: admission webhook") as raised:
        create()
    assert "not removed" not in str(raised.value)
    assert helm.commands() == ["dependency", "history", "upgrade", "uninstall"]
    uninstall = helm.only("uninstall")
    assert uninstall.args[2] == "hyperpod-dependencies"
    assert uninstall.option("--namespace") == "kube-system"


def test_a_failed_cleanup_says_how_to_remove_the_partial_release(
    helm: FakeHelm, aws: FakeAws, github: Callable[..., None]
) -> None:
    aws.cluster_exists()
    github()
    helm.results["upgrade"] = (1, "", "Error: INSTALLATION FAILED: timed out\n")
    helm.results["uninstall"] = (1, "", "Error: Kubernetes cluster unreachable\n")

    with pytest.raises(errors.ChartInstallerError) as raised:
        create()
    message = str(raised.value)
    assert "INSTALLATION FAILED" in message
    assert "cluster unreachable" in message
    assert "helm uninstall hyperpod-dependencies --namespace kube-system" in message


def test_a_failed_install_after_an_earlier_failed_one_is_cleaned_up_too(
    helm: FakeHelm, aws: FakeAws, github: Callable[..., None]
) -> None:
    """A release whose only revision is pending-install never deployed: it is removed, installed anew,
    and removed again when that install fails."""
    aws.cluster_exists()
    github()
    helm.history = revisions("pending-install")
    helm.results["upgrade"] = (1, "", "Error: INSTALLATION FAILED: boom\n")

    with pytest.raises(errors.ChartInstallerError, match="boom"):
        create()
    assert helm.commands() == ["dependency", "history", "uninstall", "upgrade", "uninstall"]


# --- a release left pending --------------------------------------------------------------------


def test_a_release_left_pending_upgrade_is_rolled_back_to_its_last_deployed_revision(
    helm: FakeHelm, aws: FakeAws, github: Callable[..., None]
) -> None:
    aws.cluster_exists()
    github()
    helm.history = revisions("superseded", "deployed", "pending-upgrade")

    response = handler.on_event(cfn_event("Update", git_properties(), PHYSICAL_ID), None)

    assert helm.commands() == ["dependency", "history", "rollback", "template", "upgrade", "status"]
    rollback = helm.only("rollback")
    assert rollback.args[2:4] == ["hyperpod-dependencies", "2"]
    assert rollback.option("--namespace") == "kube-system"
    assert "--wait" not in rollback.args
    assert rollback.option("--timeout") == "10m"
    assert response["PhysicalResourceId"] == PHYSICAL_ID


@pytest.mark.parametrize("status", ["pending-rollback", "pending-install"])
def test_a_pending_release_after_a_deployed_one_is_rolled_back(
    helm: FakeHelm, aws: FakeAws, github: Callable[..., None], status: str
) -> None:
    aws.cluster_exists()
    github()
    helm.history = revisions("deployed", "failed", status)

    handler.on_event(cfn_event("Update", git_properties(), PHYSICAL_ID), None)

    assert helm.only("rollback").args[3] == "1"
    assert "uninstall" not in helm.commands()


@pytest.mark.parametrize("history", [("pending-install",), ("failed", "pending-upgrade"), ("deployed", "uninstalling")])
def test_a_release_with_nothing_to_return_to_is_uninstalled_and_installed_anew(
    helm: FakeHelm, aws: FakeAws, github: Callable[..., None], history: tuple[str, ...]
) -> None:
    aws.cluster_exists()
    github()
    helm.history = revisions(*history)

    handler.on_event(cfn_event("Update", git_properties(), PHYSICAL_ID), None)

    # Installed anew: helm installs the crds/ itself, so nothing is templated for them.
    assert helm.commands() == ["dependency", "history", "uninstall", "upgrade", "status"]
    assert "--wait" not in helm.calls[2].args


def _history_started(seconds_ago: float, *statuses: str) -> str:
    """``helm history --output json`` whose last revision's operation started ``seconds_ago`` (RFC 3339 with
    nanoseconds, as Go writes a time.Time)."""
    history = revisions(*statuses)
    started = datetime.now(UTC) - timedelta(seconds=seconds_ago)
    history[-1]["updated"] = started.strftime("%Y-%m-%dT%H:%M:%S.%f") + "123+00:00"
    return json.dumps(history)


def test_a_pending_upgrade_another_run_may_still_be_doing_is_waited_for_not_rolled_back(
    helm: FakeHelm, aws: FakeAws, github: Callable[..., None], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The provider framework invoked the installer again while the first run upgrades: the second waits until
    that upgrade ends, then upgrades on top of it."""
    aws.cluster_exists()
    github()
    sleeps: list[float] = []
    monkeypatch.setattr(helm_module.time, "sleep", sleeps.append)
    helm.results["history"] = answers(
        (0, _history_started(90, "deployed", "pending-upgrade"), ""),
        (0, _history_started(105, "deployed", "pending-upgrade"), ""),
        (0, _history_started(120, "superseded", "deployed"), ""),
    )

    create()

    assert helm.commands() == ["dependency", "history", "history", "history", "template", "upgrade", "status"]
    assert sleeps == [helm_module.PENDING_POLL_SECONDS] * 2


def test_a_pending_upgrade_too_young_to_be_stale_fails_in_one_line_when_there_is_no_time_to_wait(
    helm: FakeHelm, aws: FakeAws, github: Callable[..., None]
) -> None:
    aws.cluster_exists()
    github()
    helm.results["history"] = (0, _history_started(60, "deployed", "pending-upgrade"), "")
    context = _Context((deadline.DEADLINE_MARGIN_SECONDS + deadline.INSTALL_RESERVE_SECONDS + 5) * 1000)

    with pytest.raises(errors.ChartInstallerError) as raised:
        handler.on_event(cfn_event("Create", git_properties()), context)

    message = str(raised.value)
    assert re.match(r"release kube-system/hyperpod-dependencies is pending-upgrade at revision 2, started 6\d s "
                    "ago: another run of the installer may still be working on it", message)
    assert f"retry once it is {deadline.STALE_OPERATION_SECONDS} s old" in message
    assert helm.commands() == ["dependency", "history"]


def test_a_pending_upgrade_older_than_the_installers_deadline_is_rolled_back(
    helm: FakeHelm, aws: FakeAws, github: Callable[..., None]
) -> None:
    aws.cluster_exists()
    github()
    helm.results["history"] = (0, _history_started(deadline.STALE_OPERATION_SECONDS + 1, "deployed", "pending-upgrade"),
                               "")

    create()

    assert helm.commands() == ["dependency", "history", "rollback", "template", "upgrade", "status"]
    assert helm.only("rollback").args[2:4] == ["hyperpod-dependencies", "1"]


def test_a_failed_rollback_stops_before_the_upgrade(
    helm: FakeHelm, aws: FakeAws, github: Callable[..., None]
) -> None:
    aws.cluster_exists()
    github()
    helm.history = revisions("deployed", "pending-upgrade")
    helm.results["rollback"] = (1, "", "Error: timed out waiting for the condition\n")

    with pytest.raises(errors.ChartInstallerError, match="helm rollback kube-system/hyperpod-dependencies 1"):
        handler.on_event(cfn_event("Update", git_properties(), PHYSICAL_ID), None)
    assert "upgrade" not in helm.commands()
    assert "uninstall" not in helm.commands()


def test_an_unreadable_history_fails_before_touching_the_release(
    helm: FakeHelm, aws: FakeAws, github: Callable[..., None]
) -> None:
    aws.cluster_exists()
    github()
    helm.results["history"] = (1, "", "Error: Kubernetes cluster unreachable: dial tcp: i/o timeout\n")

    with pytest.raises(errors.ChartInstallerError, match="helm history .*cluster unreachable"):
        create()
    assert helm.commands() == ["dependency", "history"]


# --- CRDs on update ----------------------------------------------------------------------------

RENDERED = """---
# Source: hyperpod-helm-chart/charts/training-operators/crds/pytorchjobs.kubeflow.org-CustomResourceDefinition.yaml
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: pytorchjobs.kubeflow.org
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: second-in-the-same-file.kubeflow.org

---
# Source: hyperpod-helm-chart/crds/top.example.com.yaml
kind: CustomResourceDefinition
metadata:
  name: top.example.com

---
# Source: hyperpod-helm-chart/charts/mpi-operator/templates/mpijob-crd.yaml
kind: CustomResourceDefinition
metadata:
  name: mpijobs.kubeflow.org
---
# Source: hyperpod-helm-chart/templates/crds/looks-like-one.yaml
kind: ConfigMap
"""


def test_an_update_applies_the_crds_of_crds_directories_before_upgrading(
    helm: FakeHelm, aws: FakeAws, github: Callable[..., None]
) -> None:
    aws.cluster_exists()
    github()
    helm.history = revisions("deployed")
    helm.rendered = RENDERED

    handler.on_event(cfn_event("Update", git_properties(), PHYSICAL_ID), None)

    assert helm.commands() == ["dependency", "history", "template", "kubectl", "upgrade", "status"]
    template = helm.only("template")
    assert "--include-crds" in template.args
    assert template.option("--namespace") == "kube-system"
    assert template.values == helm.only("upgrade").values
    kubectl = helm.only("kubectl")
    assert kubectl.args[1:5] == ["apply", "--server-side", "--force-conflicts", "--field-manager"]
    assert kubectl.kubeconfig is not None
    applied = kubectl.applied
    assert applied is not None
    for name in ("pytorchjobs.kubeflow.org", "second-in-the-same-file.kubeflow.org", "top.example.com"):
        assert f"name: {name}" in applied
    # Templates are helm's to upgrade, whatever their path or kind.
    assert "mpijobs.kubeflow.org" not in applied
    assert "ConfigMap" not in applied


def test_an_update_of_a_chart_without_crds_applies_nothing(
    helm: FakeHelm, aws: FakeAws, github: Callable[..., None]
) -> None:
    aws.cluster_exists()
    github()
    helm.history = revisions("deployed")
    helm.rendered = "---\n# Source: hyperpod-helm-chart/templates/cm.yaml\nkind: ConfigMap\n"

    handler.on_event(cfn_event("Update", git_properties(), PHYSICAL_ID), None)

    assert "kubectl" not in helm.commands()


def test_a_failed_crd_apply_stops_before_the_upgrade(
    helm: FakeHelm, aws: FakeAws, github: Callable[..., None]
) -> None:
    aws.cluster_exists()
    github()
    helm.history = revisions("deployed")
    helm.rendered = RENDERED
    helm.results["kubectl"] = (1, "", "The CustomResourceDefinition is invalid\n")

    with pytest.raises(errors.ChartInstallerError, match="kubectl apply of the CRDs"):
        handler.on_event(cfn_event("Update", git_properties(), PHYSICAL_ID), None)
    assert "upgrade" not in helm.commands()


def test_a_create_leaves_the_crds_to_helm(helm: FakeHelm, aws: FakeAws, github: Callable[..., None]) -> None:
    aws.cluster_exists()
    github()
    helm.rendered = RENDERED

    create()

    assert "template" not in helm.commands()
    assert "kubectl" not in helm.commands()


# --- vendored charts ---------------------------------------------------------------------------

VENDORED_CHART_YAML = "apiVersion: v2\nname: vendored\nversion: 0.1.0\ndependencies:\n  - name: dep\n"


def _vendored_zip(archive: str, locked: str, extra: dict[str, str] | None = None) -> bytes:
    lock = {"archives": {"charts/dep-1.0.0.tgz": hashlib.sha256(locked.encode()).hexdigest()}}
    return _chart_zip({
        "Chart.yaml": VENDORED_CHART_YAML,
        "charts/dep-1.0.0.tgz": archive,
        "vendor-lock.json": json.dumps(lock),
        **(extra or {}),
    })


def _s3_props(key: str) -> dict[str, object]:
    return git_properties(Source="s3", AssetBucket="cdk-assets", AssetKey=key, ChartPath=None)


def test_a_vendored_chart_is_checked_against_its_lock_and_not_rebuilt(helm: FakeHelm, aws: FakeAws) -> None:
    aws.cluster_exists()
    aws.s3_object("cdk-assets", "vendored.zip", _vendored_zip("archive", "archive"))

    create(_s3_props("vendored.zip"))

    assert helm.commands() == ["history", "upgrade", "status"]


@pytest.mark.parametrize(
    "bundle",
    [_vendored_zip("tampered", "archive"), _vendored_zip("archive", "archive", {"charts/unlocked-2.0.0.tgz": "x"})],
    ids=["changed-archive", "unlocked-archive"],
)
def test_a_vendored_chart_that_differs_from_its_lock_is_refused(helm: FakeHelm, aws: FakeAws, bundle: bytes) -> None:
    aws.cluster_exists()
    aws.s3_object("cdk-assets", "vendored.zip", bundle)

    with pytest.raises(errors.ChartInstallerError, match="differ from vendor-lock.json"):
        create(_s3_props("vendored.zip"))
    assert helm.calls == []


def test_a_release_installed_just_before_the_deadline_still_succeeds(
    helm: FakeHelm, aws: FakeAws, github: Callable[..., None], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Reading the revision is not worth failing, and leaving behind, a release that is installed."""
    aws.cluster_exists()
    github()
    now = time.monotonic()

    def upgrade_until_the_deadline() -> tuple[int, str, str]:
        monkeypatch.setattr(time, "monotonic", lambda: now + deadline.FUNCTION_TIMEOUT_SECONDS - 40)
        return 0, "Release has been upgraded.\n", ""

    helm.results["upgrade"] = upgrade_until_the_deadline

    response = create()

    assert response["Data"] == {"Release": "hyperpod-dependencies", "Namespace": "kube-system"}
    assert helm.commands() == ["dependency", "history", "upgrade"]
