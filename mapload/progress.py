"""Watching an execution: its Map run's shard counts, drawn as one progress line."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TextIO

from botocore.exceptions import ClientError

from mapload.environment import Clients

TERMINAL = frozenset({"SUCCEEDED", "FAILED", "TIMED_OUT", "ABORTED", "PENDING_REDRIVE"})


@dataclass
class Progress:
    """Shard counts of the execution's Map run (DescribeMapRun itemCounts)."""

    total: int = 0
    succeeded: int = 0
    failed: int = 0
    running: int = 0

    @property
    def done(self) -> int:
        return self.succeeded + self.failed


def map_run_progress(clients: Clients, execution_arn: str) -> Progress | None:
    """The Map run's item counts, or None before the Map state has started."""
    try:
        runs = clients.sfn.list_map_runs(executionArn=execution_arn).get("mapRuns", [])
        if not runs:
            return None
        counts = clients.sfn.describe_map_run(mapRunArn=runs[-1]["mapRunArn"]).get("itemCounts", {})
    except (ClientError, AttributeError):
        # Progress is advisory (the execution's status decides): a refused or failed poll shows
        # none this time. AttributeError is moto's in-process ListMapRuns on a just-started run.
        return None
    return Progress(
        total=int(counts.get("total", 0)),
        succeeded=int(counts.get("succeeded", 0)),
        failed=int(counts.get("failed", 0)) + int(counts.get("timedOut", 0)) + int(counts.get("aborted", 0)),
        running=int(counts.get("running", 0)),
    )


def progress_line(status: str, progress: Progress | None, seconds: float, width: int = 30) -> str:
    if progress is None or progress.total == 0:
        return f"{status:<9} planning… {seconds:,.0f} s"
    filled = int(width * progress.done / progress.total)
    bar = "#" * filled + "." * (width - filled)
    failed = f" · {progress.failed} failed" if progress.failed else ""
    return (
        f"{status:<9} [{bar}] shards {progress.done}/{progress.total} "
        f"({100 * progress.done / progress.total:.0f}%){failed} · {seconds:,.0f} s"
    )


class ProgressBar:
    """One line redrawn in place on a terminal; a line every few seconds in a log."""

    def __init__(self, stream: TextIO, enabled: bool) -> None:
        self.stream = stream
        self.enabled = enabled
        self.tty = stream.isatty()
        self.last = 0.0

    def show(self, text: str, *, final: bool = False) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if not final and not self.tty and now - self.last < 5.0:
            return
        self.last = now
        if self.tty:
            self.stream.write("\r" + text.ljust(80) + ("\n" if final else ""))
        else:
            self.stream.write(text + "\n")
        self.stream.flush()


def watch(
    clients: Clients,
    execution_arn: str,
    bar: ProgressBar,
    *,
    interval: float = 2.0,
    sleep: Callable[[float], None] = time.sleep,
) -> dict[str, Any]:
    started = time.monotonic()
    while True:
        described: dict[str, Any] = clients.sfn.describe_execution(executionArn=execution_arn)
        progress = map_run_progress(clients, execution_arn)
        status = str(described["status"])
        bar.show(progress_line(status, progress, time.monotonic() - started), final=status in TERMINAL)
        if status in TERMINAL:
            return described
        sleep(interval)
