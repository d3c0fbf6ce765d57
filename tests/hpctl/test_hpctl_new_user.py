"""What a new user trips on: answers botocore cannot read, one unreadable cluster, names already taken, a shared
VPC, removing a group that has nodes, the flags and the messages outside the repository."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.awsrequest import AWSResponse
from hpctl_testkit import CLUSTER, REGION, stubbed

BASE = ("--cluster", CLUSTER, "--region", REGION)


class _Body:
    """The raw body botocore reads an HTTP answer from (AWSResponse.content calls raw.stream())."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def stream(self, **_: Any):
        yield self.data


def answered_by_a_proxy(client: Any) -> Any:
    """Every request of `client` answered 200 with an HTML page, as a captive proxy does: no request leaves."""

    def send(request: Any, **_: Any) -> AWSResponse:
        return AWSResponse(request.url, 200, {"Content-Type": "text/html"},
                           _Body(b"<html><body>Please log in to the proxy<br></body></html>"))

    client.meta.events.register("before-send", send)
    return client


def test_an_answer_botocore_cannot_parse_is_one_line_and_exit_3(run, config_file: Path) -> None:
    cloudformation = answered_by_a_proxy(boto3.client("cloudformation", region_name=REGION))
    code, _, err = run("pre-destroy", "--config", str(config_file), clients={"cloudformation": cloudformation})
    assert code == 3, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert "could not be read" in err and "proxy" in err
