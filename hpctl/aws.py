"""The one place boto3 clients are made: region, profile and retry policy in one object tests can replace."""

from __future__ import annotations

from typing import Any

import boto3
from botocore.config import Config

from hpctl import __version__

# Adaptive retries back off and rate-limit on throttling; 10 attempts ride out a busy control plane.
RETRY_CONFIG = Config(
    retries={"mode": "adaptive", "max_attempts": 10},
    connect_timeout=10,
    read_timeout=60,
    user_agent_extra=f"hpctl/{__version__}",
)


class Clients:
    """Makes (and caches) one boto3 client per service for one region and profile.

    Tests pass `preset={"sagemaker": stubbed_client}` to inject clients.
    """

    def __init__(self, region: str, profile: str | None = None, preset: dict[str, Any] | None = None) -> None:
        self.region = region
        self.profile = profile
        self._clients: dict[str, Any] = dict(preset or {})
        self._session: boto3.Session | None = None

    def __call__(self, service: str) -> Any:
        if service not in self._clients:
            if self._session is None:
                self._session = boto3.Session(profile_name=self.profile, region_name=self.region)
            self._clients[service] = self._session.client(service, config=RETRY_CONFIG)
        return self._clients[service]
