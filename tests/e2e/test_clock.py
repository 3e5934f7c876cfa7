"""The emulator's injected clock (mapload/emulator/clock.py): Wait states spend its time, not real time,
and a handler that takes `now` reads it."""

from __future__ import annotations

import json

import pytest
from moto.stepfunctions.parser.asl.component.state.wait.wait_function.wait_function import WaitFunction
from virtual_clock import VirtualClock

from mapload.emulator.embedded import ACCOUNT, Emulator, FunctionDef

pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("e2e")]

REGION = "us-east-1"
FUNCTION = f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:clock-probe"
START = 1_800_000_000.0


def test_wait_states_advance_the_virtual_clock_and_handlers_read_it() -> None:
    """An hour's Wait and a SecondsPath Wait end at once; the function sees the clock moved on."""
    moto_wait = WaitFunction._wait_interval
    clock = VirtualClock(start=START)
    definition = {
        "StartAt": "Hour",
        "States": {
            "Hour": {"Type": "Wait", "Seconds": 3600, "Next": "Given"},
            "Given": {"Type": "Wait", "SecondsPath": "$.seconds", "Next": "Now"},
            "Now": {
                "Type": "Task",
                "Resource": "arn:aws:states:::lambda:invoke",
                "Parameters": {"FunctionName": FUNCTION, "Payload.$": "$"},
                "OutputPath": "$.Payload",
                "End": True,
            },
        },
    }
    with Emulator("clock", REGION, clock=clock) as emu:
        role = emu.client("iam").create_role(RoleName="clock", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
        probe = FunctionDef(
            "Probe", "clock-probe", FUNCTION, "clock_handlers.handle", {}, 5.0, now=clock.time
        )
        emu.add_function(probe, role)
        machine = emu.client("stepfunctions").create_state_machine(
            name="clock", definition=json.dumps(definition), roleArn=role
        )["stateMachineArn"]
        # An hour and a half of Wait states inside a 60 s deadline: no real waiting.
        described = emu.wait(
            emu.start(machine, "clock-1", {"seconds": 90}), interval=0.05, deadline_seconds=60
        )
    assert described["status"] == "SUCCEEDED", described
    assert json.loads(described["output"]) == {"now": START + 3600 + 90}
    assert clock.time() == START + 3690
    assert WaitFunction._wait_interval is moto_wait  # restored when the emulator closes
