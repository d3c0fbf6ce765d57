"""The test kit's pool of stubbed clients: a client lent again answers only from its new Stubber."""

from __future__ import annotations

from hpctl_testkit import return_stubbed_clients, stubbed

IDENTITY = {"UserId": "AIDAEXAMPLE", "Account": "111122223333", "Arn": "arn:aws:iam::111122223333:user/first"}


def test_a_returned_client_is_lent_again_with_only_its_new_stubber() -> None:
    return_stubbed_clients()
    client, stub = stubbed("sts")
    stub.add_response("get_caller_identity", IDENTITY)  # left pending
    return_stubbed_clients()

    again, new_stub = stubbed("sts")
    assert again is client
    new_stub.add_response("get_caller_identity", {**IDENTITY, "Account": "444455556666"})
    assert again.get_caller_identity()["Account"] == "444455556666"
    new_stub.assert_no_pending_responses()
    other, _ = stubbed("sts")
    assert other is not again  # a client is lent to one holder at a time
