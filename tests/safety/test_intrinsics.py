"""One rendering of CloudFormation intrinsics, for cdk-nag finding names (nag_name) and the HyperPod rules."""

from __future__ import annotations

import pytest
from aws_cdk import App, Fn, Stack
from aws_cdk import aws_s3 as s3

from infra.constructs.common import nag_name
from infra.facts.intrinsics import UNKNOWN, render


@pytest.mark.parametrize(("value", "text"), [
    ("arn:aws:s3:::b", "arn:aws:s3:::b"),
    ({"Ref": "Bucket"}, "<Bucket>"),
    ({"Ref": "AWS::Partition"}, "<AWS::Partition>"),
    ({"Fn::GetAtt": ["Bucket", "Arn"]}, "<Bucket.Arn>"),
    ({"Fn::GetAtt": "Bucket.Arn"}, "<Bucket.Arn>"),
    ({"Fn::Join": ["", [{"Fn::GetAtt": ["Bucket", "Arn"]}, "/prefix/*"]]}, "<Bucket.Arn>/prefix/*"),
    ({"Fn::Join": [":", ["arn", {"Ref": "AWS::Partition"}, {"Fn::Join": ["-", ["a", "b"]]}]]},
     "arn:<AWS::Partition>:a-b"),
    ({"Fn::Sub": "arn:${AWS::Partition}:s3:::b"}, "arn:${AWS::Partition}:s3:::b"),
    ({"Fn::Sub": ["${B}-x", {"B": "y"}]}, "${B}-x"),
    ({"Fn::ImportValue": "net-VpcId"}, "<import:net-VpcId>"),
    (16, "16"),
    (True, "true"),
])
def test_known_forms_render_as_cdk_nag_prints_them(value, text):
    assert render(value) == text


@pytest.mark.parametrize("value", [
    {"Fn::If": ["IsProd", "a", "b"]},
    {"Fn::Select": [0, {"Fn::GetAZs": ""}]},
    {"Ref": ["not", "a", "name"]},
    {"Fn::Join": ["only a separator"]},
    {"Ref": "A", "Fn::GetAtt": ["B", "Arn"]},
    None,
    ["a", "list"],
])
def test_unknown_input_renders_as_the_unknown_marker_instead_of_raising(value):
    assert render(value) == UNKNOWN


def test_an_unknown_part_of_a_join_stays_visible():
    assert render({"Fn::Join": ["/", ["a", {"Fn::If": ["C", "x", "y"]}]]}) == f"a/{UNKNOWN}"


@pytest.fixture(scope="module")
def stack() -> Stack:
    return Stack(App(), "Names")


def test_nag_name_derives_the_logical_id_in_a_resource_arn(stack):
    bucket = s3.Bucket(stack, "Bucket")
    logical_id = stack.get_logical_id(bucket.node.default_child)
    assert nag_name(stack, bucket.arn_for_objects("prefix/*")) == f"<{logical_id}.Arn>/prefix/*"


def test_nag_name_refuses_a_value_it_cannot_name_exactly(stack):
    with pytest.raises(ValueError, match=r"cannot name .* in a cdk-nag finding"):
        nag_name(stack, Fn.select(0, Fn.get_azs()))
