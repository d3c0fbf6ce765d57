"""Fixtures for the hpctl tests (helpers live in hpctl_testkit.py)."""

from hpctl_testkit import config_file, fake_aws_env, run, stubbed_clients_returned, write_config

__all__ = ["config_file", "fake_aws_env", "run", "stubbed_clients_returned", "write_config"]
