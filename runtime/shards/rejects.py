"""The shard's rejected records: streamed out as NDJSON, counted by reason, a small sample kept."""

from __future__ import annotations

import base64
import json
from collections import Counter
from typing import Any

from adapters.rdf import Writable
from logic.csvrecords import CutRecord
from logic.records import Line
from logic.report import clip_sample
from logic.values import ParquetRow, Reject

SAMPLE_SIZE = 5


class RejectSink:
    """Rejected records with everything needed to fix and reload them, written to `out` as they
    come (the Worker's `out` streams to S3 in parts: nothing is spooled to /tmp)."""

    def __init__(self, source: str, member: str | None = None, *, out: Writable, line_base: int = 0) -> None:
        self._member = member
        # The shard's lines before this segment's first (logic/checkpoints.py): shardLine counts
        # from the shard's first line in every segment.
        self._line_base = line_base
        self._source = source
        self._file = out
        self.count = 0
        self.lines = 0  # the source lines the rejected records hold
        self.by_reason: Counter[str] = Counter()
        self.sample: list[dict[str, Any]] = []

    def add(self, line: Line | CutRecord | ParquetRow, code: str, reason: str) -> None:
        if isinstance(line, ParquetRow):
            self._write(self._row(line, code, reason), 1)
            return
        try:
            raw: dict[str, str] = {"raw": line.raw.decode("utf-8")}
        except UnicodeDecodeError:  # keep the exact bytes so the row can be repaired and reloaded
            raw = {
                "raw": line.raw.decode("utf-8", "replace"),
                "rawBase64": base64.b64encode(line.raw).decode(),
            }
        # A CSV record may span lines (a quoted field's line breaks): say how many it holds.
        lines = line.raw.count(b"\n") + 1
        record = {
            "source": self._source,
            **({"member": self._member} if self._member else {}),
            "shardLine": self._line_base + line.number,
            "lines": lines,
            "offset": line.offset,
            "code": code,
            "reason": reason,
            **raw,
        }
        self._write(record, lines)

    def _row(self, row: ParquetRow, code: str, reason: str) -> dict[str, Any]:
        """A Parquet row's reject: where it is (row group, row in the object) and its values as
        JSON text (none when its page could not be decoded)."""
        shown = (
            {}
            if isinstance(row.fields, Reject)
            else {"raw": json.dumps(row.fields, ensure_ascii=False, default=str)}
        )
        return {
            "source": self._source,
            "rowGroup": row.row_group,
            "row": row.row,
            "code": code,
            "reason": reason,
            **shown,
        }

    def _write(self, record: dict[str, Any], lines: int) -> None:
        self._file.write(json.dumps(record, ensure_ascii=False).encode() + b"\n")
        self.count += 1
        self.lines += lines
        self.by_reason[record["code"]] += 1
        if len(self.sample) < SAMPLE_SIZE:
            # The sample travels in the ledger item and the report: keep it small; the rejects
            # file holds the whole line.
            self.sample.append(clip_sample(record))
