"""What Plan reads of a source's objects and how long it takes: the objects it may accept in its
timeout (issue 42 item 2).

Plan lists the source (one request a 1,000 keys) and reads, per object, a CSV header's first bytes
or a Parquet footer (one ranged GET each, READS_IN_FLIGHT at a time) — and nothing of the other
formats (JSON Lines, DynamoDB JSON, headerless CSV, N-Quads), whose data starts at byte 0. A
source with more objects to read than fit in half of Plan's timeout is refused, naming the
settings that raise the limit: the state machine has no timeout retry worth the name for Plan.
"""

from __future__ import annotations

import math

from logic.errors import InputValidationError

# Ranged GETs in flight: a header read holds at most planning.HEADER_MAX_BYTES (1 MiB), a footer
# read its footer (tens of KiB as writers make them; parquet.MAX_FOOTER_BYTES at most, which 32 at
# once would not fit in Plan's 512 MiB: such footers are not bounded together).
READS_IN_FLIGHT = 32
# A GET's round trip within a Region, as stated (docs/PERFORMANCE.md uses the same 20 ms), and
# a ListObjectsV2 page of 1,000 keys (a longer answer).
GET_SECONDS = 0.020
LIST_PAGE_SECONDS = 0.2
LIST_PAGE_KEYS = 1000
# CPU an object read, at one vCPU: the GET's signing and parsing, the footer, the schema check —
# 1.8 ms a Parquet object as bench/parquet.py measures Plan's handler; a CSV header costs less,
# and is taken at the same. Lambda gives a function one vCPU at 1,769 MB, less in proportion.
READ_CPU_SECONDS = 0.0018
VCPU_MIB = 1769
# Of Plan's timeout, what reading may take: the rest is for the ledger, the cut and the manifest,
# and for a slower S3 than stated.
SHARE_OF_TIMEOUT = 0.5


def seconds(objects: int, *, read: bool, memory_mib: int) -> float:
    """Plan's time to list `objects` and (`read`) read each one's header or footer."""
    listing = math.ceil(objects / LIST_PAGE_KEYS) * LIST_PAGE_SECONDS
    if not read:
        return listing
    cpu = objects * READ_CPU_SECONDS / min(1.0, memory_mib / VCPU_MIB)
    return listing + math.ceil(objects / READS_IN_FLIGHT) * GET_SECONDS + cpu


def most_objects(*, read: bool, timeout_seconds: int, memory_mib: int) -> int:
    """The most objects whose listing and reads take at most SHARE_OF_TIMEOUT of the timeout."""
    allowed = timeout_seconds * SHARE_OF_TIMEOUT
    low, high = 0, 1
    while seconds(high, read=read, memory_mib=memory_mib) <= allowed:
        low, high = high, high * 2
    while high - low > 1:  # seconds() grows with objects: the last count that fits
        middle = (low + high) // 2
        low, high = (
            (middle, high) if seconds(middle, read=read, memory_mib=memory_mib) <= allowed else (low, middle)
        )
    return low


def check_objects(
    objects: int, *, read: str | None, source: str, timeout_seconds: int, memory_mib: int
) -> None:
    """Refuse `objects` objects of `source` when Plan cannot list them and read each one's `read`
    (a CSV header, a Parquet footer; None: nothing) in SHARE_OF_TIMEOUT of its timeout."""
    limit = most_objects(read=read is not None, timeout_seconds=timeout_seconds, memory_mib=memory_mib)
    if objects <= limit:
        return
    what = f"reads each one's {read} ({READS_IN_FLIGHT} at a time)" if read else "lists them"
    raise InputValidationError(
        "source",
        f"{source} holds {objects:,} objects: Plan {what} and fits at most {limit:,} in half of its "
        f"{timeout_seconds} s timeout at {memory_mib} MiB; raise the environment's control_timeout_seconds "
        "(at most 900) or control_memory_mib, or split the source into jobs of fewer objects",
    )
