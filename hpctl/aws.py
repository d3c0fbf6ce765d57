"""The one place boto3 clients are made: region, profile and retry policy in one object tests can replace."""

from __future__ import annotations

import logging
import sys
from functools import cache
from typing import Any

import boto3
import botocore.loaders
import botocore.session
from botocore.config import Config
from botocore.exceptions import ConnectionError as BotoConnectionError

from hpctl import __version__

# Adaptive retries back off and rate-limit on throttling. botocore retries an unreachable endpoint with the same
# budget, so it stays small (4 retries, 5 s to connect) and each retry of a connection says so on stderr.
MAX_RETRIES = 4
RETRY_CONFIG = Config(
    retries={"mode": "adaptive", "max_attempts": MAX_RETRIES},
    connect_timeout=5,
    read_timeout=60,
    user_agent_extra=f"hpctl/{__version__}",
)


@cache
def loader() -> botocore.loaders.Loader:
    """One loader per process: service models are parsed once, not once per session."""
    return botocore.loaders.create_loader()


def new_session(profile: str | None, region: str | None) -> boto3.Session:
    core = botocore.session.get_session()
    core.register_component("data_loader", loader())
    return boto3.Session(botocore_session=core, profile_name=profile, region_name=region)


def configured_region(profile: str | None) -> str | None:
    """The region botocore's configuration gives: AWS_DEFAULT_REGION, then the profile's `region` (botocore's own
    chain does not read AWS_REGION: botocore/configprovider.py; the caller checks it first).

    Read from a botocore session without the event handlers a client needs: registering them is most of the 10 ms
    a session takes to make, and a region lookup sends nothing. The profile is set as boto3 sets it
    (boto3/session.py: `set_config_variable('profile', ...)`; botocore's Session(profile=...) stores the same
    session variable), so a missing profile raises botocore's ProfileNotFound here as it would there."""
    session = botocore.session.Session(profile=profile, include_builtin_handlers=False)
    region = session.get_config_variable("region")
    return str(region) if region else None


def _note_connection_retry(attempts: int, caught_exception: Exception | None = None, **_: Any) -> None:
    """A line on stderr when botocore is about to retry a connection failure, instead of silence."""
    if isinstance(caught_exception, BotoConnectionError) and attempts <= MAX_RETRIES:
        print(
            f"hpctl: cannot reach the endpoint yet ({caught_exception}); retry {attempts} of {MAX_RETRIES}",
            file=sys.stderr,
        )


def enable_debug_log() -> None:
    """botocore's request and response log on stderr (`--debug`)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s %(message)s"))
    logger = logging.getLogger("botocore")
    logger.setLevel(logging.DEBUG)
    logger.addHandler(handler)


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
            client = self._session.client(service, config=RETRY_CONFIG)
            client.meta.events.register("needs-retry", _note_connection_retry)
            self._clients[service] = client
        return self._clients[service]
