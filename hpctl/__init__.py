"""hpctl: the operator CLI for a SageMaker HyperPod cluster orchestrated by Amazon EKS."""

__version__ = "0.1.0"
