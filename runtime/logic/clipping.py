"""How a sample shows a long text: cut to a budget of JSON bytes, between two characters (stdlib only).

Samples (rejects, skipped keys, the loader's errors, dangling edges) travel in ledger items
(DynamoDB: 400 KB) and in the state machine's payloads (Step Functions: 256 KiB, counted as the
UTF-8 bytes of the JSON), so their size must be bounded in bytes, not characters. What a character
costs there depends on who writes the JSON: Lambda's python3.12 runtime writes non-ASCII as it is
(1 to 4 bytes), json.dumps' default (the ledger, moto's interpreter in `mapload run-local`, the
older runtimes) escapes it (6 bytes; 12 for a character outside the BMP, a surrogate pair), and
every writer escapes control characters (6). A text is measured here as the escaped form, the most
any of them spends: a clipped text costs at most its budget however it is written.
"""

from __future__ import annotations

from json.encoder import encode_basestring_ascii

# A text of a sample: a reject's raw line, reason, source or member; a skipped key's value; a
# loader error's message.
TEXT_BYTES = 1000
# An id in the edge endpoint check's sample (ten edges, five ids each).
ID_BYTES = 200


def json_bytes(text: str) -> int:
    """The bytes `text` takes inside a JSON string, every non-ASCII character escaped."""
    return len(encode_basestring_ascii(text)) - 2


def clip(text: str, budget: int) -> str:
    """`text` when it costs at most `budget` bytes as JSON, else its longest prefix that fits with
    "... (N characters)" after it, N the original length: never cut inside a character."""
    if len(text) <= budget and json_bytes(text) <= budget:
        return text
    tail = f"... ({len(text):,} characters)"
    room = budget - len(tail)
    cut = 0
    # At most `room` characters can fit (each costs a byte or more): only those are measured.
    for char in text[: max(room, 0)]:
        room -= json_bytes(char)
        if room < 0:
            break
        cut += 1
    return text[:cut] + tail
