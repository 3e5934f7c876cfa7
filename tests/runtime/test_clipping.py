"""A sample's text is clipped to a budget of JSON bytes (logic/clipping.py): however the JSON is
written (non-ASCII as is, as Lambda's python3.12 runtime writes it, or escaped, as json.dumps and
moto write it) it costs at most the budget, it is cut between two characters and says how long it
was."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from logic import endpoints, graph_load, report
from logic.clipping import ID_BYTES, TEXT_BYTES, clip, json_bytes

pytestmark = pytest.mark.runtime

# Every kind of character: ASCII, JSON's escapes, control characters, 2-, 3- and 4-byte UTF-8,
# and lone surrogates (json.loads gives them for an unpaired "\ud800").
TEXT = st.text(
    alphabet=st.sampled_from(["x", '"', "\\", "\n", "\x01", "\x7f", "é", "中", "😀", "\ud800", "\udfff"]),
    max_size=400,
)


def written(text: str) -> tuple[int, int]:
    """The text's bytes in a JSON document: as python3.12's Lambda runtime writes it, and escaped."""
    raw = json.dumps(text, ensure_ascii=False).encode("utf-8", "surrogatepass")
    return len(raw) - 2, len(json.dumps(text)) - 2


@settings(max_examples=300, deadline=None)
@given(TEXT, st.integers(min_value=40, max_value=300))
def test_a_clipped_text_costs_at_most_its_budget_however_it_is_written(text: str, budget: int) -> None:
    clipped = clip(text, budget)
    assert max(written(clipped)) <= budget
    if json_bytes(text) <= budget:
        assert clipped == text
    else:
        shown, tail = clipped.rsplit("... (", 1)
        assert text.startswith(shown)  # a prefix, cut between two characters
        assert tail == f"{len(text):,} characters)"
        # The longest prefix that fits: one more character would not.
        assert json_bytes(text[: len(shown) + 1]) + len(tail) + 5 > budget
    assert clip(clipped, budget) == clipped  # clipping again (Worker, then Finalize) changes nothing


def test_a_text_of_costly_characters_keeps_as_many_as_its_bytes_allow() -> None:
    for char, cost in (("x", 1), ("é", 6), ("中", 6), ("😀", 12), ("\x01", 6), ('"', 2)):
        tail = "... (5,000 characters)"
        clipped = clip(char * 5000, TEXT_BYTES)
        assert clipped == char * ((TEXT_BYTES - len(tail)) // cost) + tail
        assert max(written(clipped)) <= TEXT_BYTES
    assert clip("x" * TEXT_BYTES, TEXT_BYTES) == "x" * TEXT_BYTES


def test_every_sample_is_clipped_by_the_same_rule() -> None:
    emoji = "😀" * 10_000
    # A reject's texts, and a skipped key's values.
    sample = report.clip_sample({"raw": emoji, "reason": emoji, "line": 7})
    assert sample == {"raw": clip(emoji, TEXT_BYTES), "reason": clip(emoji, TEXT_BYTES), "line": 7}
    counts = {"read": 1, "written": 0, "skipped": 1, "rejected": 0, "skippedSample": [{"pk": emoji}]}
    built = report.build(
        job_id="j",
        run_id="r",
        spec={"source": "s3://b/k", "format": "csv"},
        manifest=[{"bucket": "b", "key": "k", "index": 0}],
        shards={0: counts},
        error=None,
        table="t",
        seconds=None,
        rejects_location=None,
        sample=[],
    )
    assert built["skipped"]["sample"] == [{"pk": clip(emoji, TEXT_BYTES)}]
    # A dangling edge's ids.
    dangling = endpoints.DanglingEdges({emoji})
    dangling.add(emoji, emoji, "a", 0)
    assert dangling.sample[0]["from"] == dangling.sample[0]["id"] == clip(emoji, ID_BYTES)
    assert dangling.sample[0]["missing"] == [clip(emoji, ID_BYTES)]
    # The loader's first errors and failed feeds.
    summary = graph_load.summarize(
        {
            "overallStatus": {"status": "LOAD_FAILED", "parsingErrors": 1},
            "errors": {"errorLogs": [{"errorCode": "PARSING_ERROR", "errorMessage": emoji, "recordNum": 3}]},
            "failedFeeds": [{"fullUri": emoji, "status": "LOAD_FAILED"}],
        }
    )
    assert summary["errors"]["first"] == [
        {"errorCode": "PARSING_ERROR", "errorMessage": clip(emoji, TEXT_BYTES), "recordNum": 3}
    ]
    assert summary["errors"]["failedFeeds"] == [{"fullUri": clip(emoji, TEXT_BYTES), "status": "LOAD_FAILED"}]
