"""The one place boto3 clients are made: region, profile and retry policy in one object tests can replace."""

from __future__ import annotations

from functools import cache
from typing import Any

import boto3
import botocore.loaders
import botocore.session
from botocore.config import Config

from hpctl import __version__

# Adaptive retries back off and rate-limit on throttling; 10 attempts ride out a busy control plane.
RETRY_CONFIG = Config(
    retries={"mode": "adaptive", "max_attempts": 10},
    connect_timeout=10,
    read_timeout=60,
    user_agent_extra=f"hpctl/{__version__}",
)


@cache
def _loader() -> botocore.loaders.Loader:
    """One loader per process: service models are parsed once, not once per session."""
    return botocore.loaders.create_loader()


def new_session(profile: str | None, region: str | None) -> boto3.Session:
    core = botocore.session.get_session()
    core.register_component("data_loader", _loader())
    return boto3.Session(botocore_session=core, profile_name=profile, region_name=region)


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
                self._session = new_session(self.profile, self.region)
            self._clients[service] = self._session.client(service, config=RETRY_CONFIG)
        return self._clients[service]
