"""Tests of the Grafana content provisioner custom resource handler."""
