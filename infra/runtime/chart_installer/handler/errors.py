"""The installer's exceptions: the message of each is what CloudFormation shows as the reason of the failure."""

from __future__ import annotations


class ChartInstallerError(Exception):
    """A failure reported to CloudFormation with a message an operator can act on."""


class ClusterNotFoundError(ChartInstallerError):
    """The EKS cluster does not exist."""


class UnsafeArchiveError(ChartInstallerError):
    """An archive member would land outside the extraction directory, or the archive is too big."""


class DeadlineExceededError(ChartInstallerError):
    """A command or download did not finish in the time left to this invocation."""
