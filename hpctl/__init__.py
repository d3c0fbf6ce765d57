"""hpctl: the operator CLI for a SageMaker HyperPod cluster orchestrated by Amazon EKS."""

# The installed distribution's version (infra/__init__.py reads its metadata; VERSION is the one place it is set).
from infra import __version__

__all__ = ["__version__"]
