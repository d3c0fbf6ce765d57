"""The one place an AWS client is made (EKS, STS, S3), with bounded retries and timeouts."""

from __future__ import annotations

from typing import Any


def client(service: str, region: str) -> Any:
    # Imported here: the CDK app imports this package for its constants, and boto3 (s3transfer with it) and
    # botocore.config (urllib3 with it) add a fifth of a second each to every synth.
    import boto3
    from botocore.config import Config

    config = Config(retries={"max_attempts": 5, "mode": "standard"}, connect_timeout=10, read_timeout=60)
    return boto3.client(service, region_name=region, config=config)
