"""Tests of the Helm chart installer custom resource handler."""
