"""HyperPod cluster constructs and the runtime code they deploy."""
