"""Tests of what the deploy-time handlers share (infra/runtime/common) and of the readiness waiter."""
