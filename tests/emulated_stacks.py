"""CloudFormation stacks for an emulator, so `mapload start/status` find what they read (tests only)."""

from __future__ import annotations

import json
import warnings
from collections.abc import Mapping
from typing import Any


def record_stack_outputs(cloudformation: Any, outputs: Mapping[str, str]) -> None:
    """Give an emulator the CloudFormation stacks `mapload start/status` read.

    `outputs` maps `<stack name>.<output>` to values (the embedded Deployment's outputs). moto's
    CloudFormation does not deploy CDK templates, so each stack is recorded as a placeholder
    resource with literal outputs: DescribeStacks then answers as it does on AWS.
    """
    by_stack: dict[str, dict[str, str]] = {}
    for qualified, value in outputs.items():
        stack, output = qualified.rsplit(".", 1)
        by_stack.setdefault(stack, {})[output] = value
    for stack, values in by_stack.items():
        template = {
            "Resources": {"Placeholder": {"Type": "AWS::CloudFormation::WaitConditionHandle"}},
            "Outputs": {name: {"Value": value} for name, value in values.items()},
        }
        with warnings.catch_warnings():
            # moto creates no WaitConditionHandle and says so; the template stays one AWS accepts.
            warnings.filterwarnings("ignore", message=".*WaitConditionHandle.*")
            cloudformation.create_stack(StackName=stack, TemplateBody=json.dumps(template))
