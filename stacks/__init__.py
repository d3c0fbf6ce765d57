"""Deployable stacks: compositions of the infra constructs, wired left to right."""
