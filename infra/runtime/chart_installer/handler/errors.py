"""The installer's exceptions: the message of each is what CloudFormation shows as the reason of the failure.

They are the runtime's one kind of failure (``common.errors.DeployError``: one line), so the shared ``Deadline``'s
``DeadlineExceededError`` is one of them too.
"""

from __future__ import annotations

from ...common.errors import DeadlineExceededError, DeployError

# The installer's failures are DeployErrors; the name stays for the modules and tests that catch it.
ChartInstallerError = DeployError

__all__ = ["ChartInstallerError", "ClusterNotFoundError", "DeadlineExceededError", "UnsafeArchiveError"]


class ClusterNotFoundError(ChartInstallerError):
    """The EKS cluster does not exist."""


class UnsafeArchiveError(ChartInstallerError):
    """An archive member would land outside the extraction directory, or the archive is too big."""
