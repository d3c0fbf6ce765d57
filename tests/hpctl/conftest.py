"""Fixtures for the hpctl tests (helpers live in hpctl_testkit.py)."""

from hpctl_testkit import config_file, fake_aws_env, run, stubbed_clients_returned, write_config
from kube_fake import fake, kubeconfig

__all__ = ["config_file", "fake", "fake_aws_env", "kubeconfig", "run", "stubbed_clients_returned", "write_config"]
