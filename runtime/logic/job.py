"""The planned job and its manifest entries: what Plan writes and the Map hands each Worker, as models.

Plan builds them, `to_json()` gives the state machine and the manifest their JSON (the same keys,
in the same order, as the dicts they replace: payload and e2e tests hold the shapes), and each
function that receives one parses it once (`parse`) and passes the model on.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self

from pydantic import BaseModel, ConfigDict, Field


class _Wire(BaseModel):
    """A model of JSON the functions pass each other: camelCase keys, immutable, unknown keys kept
    (an older or newer sender's field is carried, never refused)."""

    model_config = ConfigDict(frozen=True, extra="allow", validate_by_name=True, validate_by_alias=True)

    @classmethod
    def parse(cls, value: Self | Mapping[str, Any]) -> Self:
        """The model of `value`: itself when already parsed, else validated once."""
        return value if isinstance(value, cls) else cls.model_validate(value)

    def to_json(self) -> dict[str, Any]:
        """The JSON object as received or built: only the fields that were given, in field order."""
        return self.model_dump(by_alias=True, exclude_unset=True)


class ManifestEntry(_Wire):
    """One shard of the manifest (docs/CONTRACTS.md "Shard item"): a byte range of one object, or
    a Parquet object's whole row groups (`rowGroups`, `firstRow`, `rows`)."""

    index: int
    bucket: str
    key: str
    etag: str
    start: int
    end: int
    object_size: int = Field(alias="objectSize")
    # Where the object's data starts (after a CSV header line): a CSV Worker near it reads from there.
    data_start: int = Field(default=0, alias="dataStart")
    header: list[str] | None = None
    first_line_number: int | None = Field(default=None, alias="firstLineNumber")
    # The lines before the data, on an object's first shard (Plan); null on the others.
    line_base: int | None = Field(default=None, alias="lineBase")
    row_groups: list[int] | None = Field(default=None, alias="rowGroups")  # [first, stop)
    first_row: int | None = Field(default=None, alias="firstRow")
    rows: int | None = None
    # A shard of Prepare's decompressed copy: the original object, its zip member and its ETag.
    source: str | None = None
    member: str | None = None
    source_etag: str | None = Field(default=None, alias="sourceEtag")

    @property
    def source_uri(self) -> str:
        """The object its records came from: the original source of a prepared copy."""
        return self.source or f"s3://{self.bucket}/{self.key}"


class PlannedJob(_Wire):
    """Plan's `job` ($.plan.job): the ids, the normalized input and what the Workers share."""

    job_id: str = Field(alias="jobId")
    run_id: str = Field(alias="runId")
    # The plan's fingerprint (logic/planning.py plan_id); absent in executions before it existed.
    plan_id: str | None = Field(default=None, alias="planId")
    # How many times `"reload": true` started the plan afresh (adapters/ledger.py reload_plan);
    # absent: never (0).
    generation: int | None = None
    spec: dict[str, Any]  # the normalized input (logic/spec.py spec_to_json)
    # The table's key schema, partition key first (what the Worker parses the spec against).
    table_key: dict[str, str] | None = Field(default=None, alias="tableKey")
    # The table the input named (`dynamodb.table`) and Plan checked; absent: the environment's own
    # (each function's TABLE_NAME), as in every job that names none.
    table: str | None = None
    objects: int | None = None
    source_bytes: int | None = Field(default=None, alias="bytes")
    # The Workers that can run at once: min(maxConcurrency, shards).
    workers: int | None = None
    # Under a write budget: the largest shard's estimated seconds at the Workers' share
    # (logic/shardtime.py); absent without a budget.
    shard_seconds: float | None = Field(default=None, alias="shardSeconds")
    # writeMode sync: the dataset, its buckets, the shards, the baseline's prefix (absent at the
    # dataset's first sync) and this run's (runtime/shards/sync_buckets.py); absent for other modes.
    sync: dict[str, Any] | None = None

    @property
    def sync_buckets(self) -> int:
        """writeMode sync: the dataset's bucket count (1 without a sync)."""
        return int((self.sync or {}).get("buckets") or 1)

    @property
    def plan(self) -> str:
        """The plan the shards are recorded under: its id (with the reload generation after
        `.`, once reloaded: a reload's shards are recorded afresh), or the run's in an older
        execution."""
        plan = str(self.plan_id or self.run_id)
        return f"{plan}.{self.generation}" if self.generation else plan

    def target_table(self, environment_table: str) -> str:
        """The table the job writes: the one it named, else the environment's."""
        return self.table or environment_table

    @property
    def source_format(self) -> str:
        """The input's `format` (csv, parquet, nquads, opencypher, ...)."""
        return str(self.spec.get("format") or "")

    @property
    def graph(self) -> dict[str, Any]:
        """The input's `graph` section, normalized; empty for a job without one."""
        return dict(self.spec.get("graph") or {})
