"""mapload/emulator/cfn.py resolves what CloudFormation would, and refuses loudly, naming what and where,
whatever it does not evaluate."""

from __future__ import annotations

import pytest

from mapload.emulator.cfn import Resolver, UnresolvedError


@pytest.fixture
def resolver() -> Resolver:
    r = Resolver("eu-west-1", "123456789012")
    r.refs["Bucket"] = "my-bucket"
    r.attrs[("Bucket", "Arn")] = "arn:aws:s3:::my-bucket"
    r.unsupported["Dashboard"] = "AWS::CloudWatch::Dashboard"
    return r


@pytest.mark.parametrize(
    "intrinsic",
    [
        {"Fn::If": ["IsProd", "a", "b"]},
        {"Fn::FindInMap": ["Map", "Key", "Value"]},
        {"Fn::Base64": "text"},
        {"Fn::GetAZs": ""},
        {"Fn::Cidr": ["10.0.0.0/16", 2, 8]},
    ],
)
def test_an_intrinsic_it_does_not_evaluate_raises_naming_it_and_where(
    resolver: Resolver, intrinsic: dict[str, object]
) -> None:
    (name,) = intrinsic
    with pytest.raises(UnresolvedError, match=rf"{name} at Fn\.Variables\.MODE"):
        resolver.resolve({"MODE": intrinsic}, "Fn.Variables")


def test_no_value_removes_the_key_or_list_item(resolver: Resolver) -> None:
    no_value = {"Ref": "AWS::NoValue"}
    assert resolver.resolve({"A": "x", "B": no_value}) == {"A": "x"}
    assert resolver.resolve(["x", no_value, {"Ref": "Bucket"}]) == ["x", "my-bucket"]


def test_a_ref_to_a_resource_type_it_does_not_create_raises_naming_it(resolver: Resolver) -> None:
    with pytest.raises(
        UnresolvedError, match=r"Ref Dashboard at Outputs\.Name: a AWS::CloudWatch::Dashboard"
    ):
        resolver.resolve({"Ref": "Dashboard"}, "Outputs.Name")


def test_a_ref_to_nothing_raises_naming_it(resolver: Resolver) -> None:
    with pytest.raises(UnresolvedError, match=r"Ref Missing at \$\.X"):
        resolver.resolve({"X": {"Ref": "Missing"}})


def test_what_it_does_evaluate(resolver: Resolver) -> None:
    value = {
        "Fn::Join": [
            "/",
            [
                {"Ref": "Bucket"},
                {"Fn::GetAtt": ["Bucket", "Arn"]},
                {"Ref": "AWS::Region"},
                {"Fn::Sub": "${AWS::AccountId}"},
            ],
        ]
    }
    assert resolver.resolve(value) == "my-bucket/arn:aws:s3:::my-bucket/eu-west-1/123456789012"
    assert resolver.resolve({"Fn::Select": [1, {"Fn::Split": [",", "a,b,c"]}]}) == "b"


def test_an_import_of_an_unresolved_export_raises_with_the_reason(resolver: Resolver) -> None:
    resolver.exports["Stack:Dashboard"] = UnresolvedError("Ref Dashboard at Outputs.Name: a dashboard")
    with pytest.raises(UnresolvedError, match=r"Fn::ImportValue Stack:Dashboard at \$: Ref Dashboard"):
        resolver.resolve({"Fn::ImportValue": "Stack:Dashboard"})


def test_a_stack_output_read_resolves_to_what_the_producer_recorded(resolver: Resolver) -> None:
    # The consumers read the Data and Graph stacks' outputs with Fn::GetStackOutput (no import an
    # export in use would pin); CDK's own references add the Region.
    resolver.outputs[("Mapload-local-Data", "TableName")] = "mapload-local-Table"
    read = {"Fn::GetStackOutput": {"StackName": "Mapload-local-Data", "OutputName": "TableName"}}
    assert resolver.resolve(read) == "mapload-local-Table"
    regional = {"Fn::GetStackOutput": {**read["Fn::GetStackOutput"], "Region": {"Ref": "AWS::Region"}}}
    assert resolver.resolve(regional) == "mapload-local-Table"
    with pytest.raises(UnresolvedError, match=r"Fn::GetStackOutput Mapload-local-Data\.Nothing at \$"):
        resolver.resolve({"Fn::GetStackOutput": {"StackName": "Mapload-local-Data", "OutputName": "Nothing"}})
    resolver.outputs[("Mapload-local-Graph", "Vpc")] = UnresolvedError("Ref Vpc at Outputs.Vpc")
    with pytest.raises(UnresolvedError, match=r"Fn::GetStackOutput Mapload-local-Graph\.Vpc at \$: Ref Vpc"):
        resolver.resolve({"Fn::GetStackOutput": {"StackName": "Mapload-local-Graph", "OutputName": "Vpc"}})
