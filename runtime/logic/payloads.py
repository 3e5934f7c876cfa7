"""How much of a Step Functions state the execution input may take (stdlib only).

A state holds at most 256 KiB. The input rides in the state twice — at its root, and as Plan's
normalized spec (`job.spec`) — beside the reports and samples the later states add
(tests/infra/test_state_payloads.py budgets those under the other half). So Plan refuses an input
whose JSON plus its normalized spec's exceeds half a state, in one line naming the size, instead of
a `States.DataLimitExceeded` later that no Catch sees.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

from logic.errors import InputValidationError

STATE_BYTES: Final = 256 * 1024
INPUT_STATE_BYTES: Final = STATE_BYTES // 2


def json_bytes(value: Any) -> int:
    """Bytes of `value` as compact UTF-8 JSON (what a state holds)."""
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode())


def check_input_size(raw_input: Mapping[str, Any], normalized: Mapping[str, Any]) -> None:
    given, spec = json_bytes(dict(raw_input)), json_bytes(dict(normalized))
    if given + spec > INPUT_STATE_BYTES:
        raise InputValidationError(
            "$",
            f"the execution input is {given:,} bytes and its normalized spec {spec:,}: together "
            f"{given + spec:,}, over the {INPUT_STATE_BYTES:,} bytes (half a 256 KiB state) the "
            "state machine carries them in; shorten the input (e.g. fewer or shorter attributes)",
        )
