"""The constructs: one module per component (network, EKS, HyperPod, storage, observability, add-ons)."""
