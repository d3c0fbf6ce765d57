"""Custom resource that installs a Helm chart on the EKS cluster before HyperPod is created."""
