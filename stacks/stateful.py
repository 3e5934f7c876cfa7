"""The stateful resources of a deployed environment, and the settings changes that would lose them.

A setting can replace or remove a resource that holds data: a new table key replaces the target
table, `existing_table` removes it, `data_key` replaces the Neptune cluster (its storage key
cannot change) and removes a created key, `graph_enabled: false` removes the cluster. CloudFormation
does that without asking, and the data goes with it. So `make deploy` first reads what is
deployed (scripts/deployed_state.py: each stack's template from CloudFormation, reduced by
`stateful_resources` below) and passes it to the app (`-c mapload-deployed=FILE`); the app
compares the templates it synthesized with it and refuses, one line a resource naming the setting
to set back (`refusals`). Without that context (tests, the embedded run, a first deploy) nothing
is compared. The pipeline deploys without it: its changes go through review.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

# The context key naming the file the deployed state is in (not a setting: no `mapload:` prefix).
DEPLOYED_CONTEXT: Final[str] = "mapload-deployed"

# What identifies each stateful resource type: the properties whose change replaces it
# (CloudFormation's "Update requires: Replacement"); a key attribute's type changes with its
# AttributeDefinitions entry.
STATEFUL: Final[Mapping[str, tuple[str, ...]]] = {
    "AWS::DynamoDB::Table": ("KeySchema", "TableName"),
    "AWS::S3::Bucket": ("BucketName",),
    "AWS::Neptune::DBCluster": ("KmsKeyId", "StorageEncrypted", "DBClusterIdentifier"),
    # A created data key: removed, what it encrypted (objects, backups) is unreadable once deleted.
    "AWS::KMS::Key": (),
}


def stateful_resources(template: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Logical id -> {"Type", and each property that identifies it} of a template's stateful resources."""
    found: dict[str, dict[str, Any]] = {}
    for logical, resource in (template.get("Resources") or {}).items():
        kind = resource.get("Type")
        if kind not in STATEFUL:
            continue
        props = resource.get("Properties") or {}
        identity: dict[str, Any] = {"Type": kind, **{name: props.get(name) for name in STATEFUL[kind]}}
        if kind == "AWS::DynamoDB::Table":
            names = {part.get("AttributeName") for part in props.get("KeySchema") or []}
            identity["KeyTypes"] = {
                d["AttributeName"]: d["AttributeType"]
                for d in props.get("AttributeDefinitions") or []
                if d.get("AttributeName") in names
            }
        found[str(logical)] = identity
    return found


def load_deployed(path: str) -> dict[str, dict[str, dict[str, Any]]]:
    """The file scripts/deployed_state.py wrote: stack name -> its stateful resources."""
    try:
        document = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise ValueError(f"cannot read the deployed state {path}: {error}") from None
    stacks = document.get("stacks") if isinstance(document, dict) else None
    if not isinstance(stacks, dict):
        raise ValueError(f"{path}: not a deployed state (no 'stacks' object)")
    return stacks


def refusals(
    deployed: Mapping[str, Mapping[str, Mapping[str, Any]]],
    synthesized: Mapping[str, Mapping[str, Any]],
    env: str,
) -> list[str]:
    """One line per deployed stateful resource the synthesized templates (stack name -> template)
    would replace or remove, naming the setting that keeps it."""
    lines = []
    for stack, resources in sorted(deployed.items()):
        now = stateful_resources(synthesized.get(stack, {}))
        for logical, before in sorted(resources.items()):
            after = now.get(logical)
            if after == before:
                continue
            verb = "remove" if after is None else "replace"
            hint = _hint(logical, before, after)
            lines.append(
                f"mapload: refusing to synthesize {stack} for deployment: it would {verb} the deployed "
                f"{before['Type']} {logical} and the data in it; {hint} in cdk.json's "
                f"mapload.environments.{env} (or destroy the stack first to start empty)"
            )
    return lines


def _hint(logical: str, before: Mapping[str, Any], after: Mapping[str, Any] | None) -> str:
    """Which setting to set back, and to what, read from the deployed resource."""
    kind = before["Type"]
    if kind == "AWS::Neptune::DBCluster":
        if after is None:
            return "set graph_enabled: true"
        return f"set data_key: {_data_key_of(before.get('KmsKeyId'))}"
    if kind == "AWS::KMS::Key":
        return 'set data_key: "create"'
    if kind == "AWS::DynamoDB::Table":
        if after is None:
            return "set existing_table: null"
        keys = {part["KeyType"]: part["AttributeName"] for part in before.get("KeySchema") or []}
        types = before.get("KeyTypes") or {}

        def attribute(role: str) -> str:
            name = keys.get(role)
            return "null" if name is None else json.dumps({"name": name, "type": types.get(name, "S")})

        return f"set partition_key: {attribute('HASH')} and sort_key: {attribute('RANGE')}"
    return "set back the setting that changed it"


def _data_key_of(kms_key_id: Any) -> str:
    """`data_key` as the deployed cluster's KmsKeyId shows it: absent, a key ARN, or the created key."""
    if kms_key_id is None:
        return "null"
    if isinstance(kms_key_id, str):
        return json.dumps(kms_key_id)
    return '"create"'
