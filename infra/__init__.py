"""Reusable CDK constructs for SageMaker HyperPod on Amazon EKS."""
