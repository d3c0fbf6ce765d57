"""Lambda onEvent handler that installs, upgrades and uninstalls a Helm release on an EKS cluster.

Wired as the ``on_event`` function of a CDK ``custom_resources.Provider``: it returns
``PhysicalResourceId`` / ``Data`` on success and raises on failure, so the Provider framework
reports FAILED to CloudFormation. The physical id is ``<namespace>/<release>``.

ResourceProperties (strings unless noted):

``ClusterName``, ``Region``, ``ReleaseName``, ``Namespace``, ``TimeoutMinutes`` (helm's --timeout, default
"10", at most "12", shortened to what is left of the Lambda's time), ``Wait`` ("true" by default: helm
--wait; "false" for charts whose workloads cannot be ready yet),
``Values`` (a JSON object as a string, or an object), ``Source``: ``git`` | ``oci`` | ``s3``.
Prefer a JSON string for ``Values``: CloudFormation turns numbers and booleans nested in an object
into strings. ``health-monitoring-agent.region`` defaults to ``Region``. ``RequiredKinds`` (optional, a JSON
list of ``group/version/Kind``): kinds another party's CRDs define, waited for before the install (``kinds``:
every 15 s, at most 8 minutes, keeping the install's reserve; any answer but NotFound fails at once); on Delete,
when they are no longer served, only helm's record of the release is deleted. Other properties (such as
``ServiceToken``) are ignored.

- git: ``GitRepository`` (https URL), ``GitRevision`` (a 40-hex commit SHA), ``ChartPath``.
- oci: ``OciChartUri`` (``oci://...``), ``ChartVersion`` (exact version).
- s3:  ``AssetBucket``, ``AssetKey`` (a zip of a chart directory), ``ChartPath`` (optional, default ".").

The Lambda runs with the kubectl layer (helm at /opt/helm/helm, override with ``HELM_BIN``; kubectl at
/opt/kubectl/kubectl, override with ``KUBECTL_BIN``) inside the VPC, and its role is an EKS cluster admin
through an access entry. Helm gets a kubeconfig file holding a short-lived bearer token, the same token
``aws eks get-token`` produces.

Failure paths (every one ends with an answer to CloudFormation, never a wait for its timeout):

- Every download and every helm or kubectl run gets a deadline from what is left of the Lambda's time
  (less a margin for reporting). A command still running at its deadline gets SIGTERM, on which helm marks
  a running install or upgrade failed instead of leaving it pending, then SIGKILL; the request fails.
- Before installing, ``helm history`` tells the release's state. A release left ``pending-*`` by a killed
  run (helm refuses any upgrade then: "another operation (install/upgrade/rollback) is in progress") is
  rolled back to its last deployed revision, or uninstalled when it never deployed; one left
  ``uninstalling`` is uninstalled.
- A release this request installs anew is uninstalled again when the install fails: the provider
  framework answers a failed Create with a marker physical id and drops the Delete that follows, so nothing
  else would remove the partial install. Time for that uninstall is kept back from the install's deadline.
- On an upgrade, the CRDs of the chart's ``crds/`` directories (of the chart and its enabled subcharts, as
  ``helm template --include-crds`` renders them) are applied first with server-side apply: helm installs
  ``crds/`` on the first install only and never upgrades them.
- Uninstall does not ``--wait``: the resources are deleted in the background, so a pod that still holds
  a volume cannot hold the delete past the Lambda's limit.

A chart directory holding ``vendor-lock.json`` (written by ``scripts/vendor_chart.py``) carries its
dependencies in ``charts/``: their sha256 digests are checked against the lock and nothing is downloaded.

Any exception, ours or not, reaches CloudFormation as one line (``runtime.common.errors.reports_failures``).

Modules, by responsibility: ``protocol`` (the requests), ``properties`` (ResourceProperties), ``deadline`` (time
limits, kept with the runtime's one ``Deadline``), ``charts`` (fetching and vendoring), ``cluster`` (EKS access),
``helm`` (the release's state, recovery, uninstall), ``crds``, ``kinds`` (waiting for CRD kinds), ``process``
(running helm and kubectl), ``aws_clients``, ``errors``; ``readiness`` is the onEvent and isComplete pair of the
installer's second, asynchronous provider (``Custom::HyperPodReadiness``: waiting for nodes, workloads and add-ons),
with its own entry points. The Lambda's asset holds the package ``runtime`` (this
package is ``runtime.chart_installer.handler``, the handler ``runtime.chart_installer.handler.on_event``); the
modules import each other relatively, so the same code runs as ``infra.runtime.chart_installer.handler`` in synth
and tests.
"""

from __future__ import annotations

from .properties import github_archive_url
from .protocol import on_event

# github_archive_url: hpctl's preflight checks that the archive the installer will download exists.
__all__ = ["github_archive_url", "on_event"]
