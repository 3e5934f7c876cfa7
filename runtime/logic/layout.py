"""Where a job's files live in the staging bucket (docs/CONTRACTS.md, "Staging bucket layout")."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable


def run_prefix(job_id: str, run_id: str) -> str:
    return f"jobs/{job_id}/{run_id}/"


def manifest_key(job_id: str, run_id: str) -> str:
    return run_prefix(job_id, run_id) + "manifest.json"


def map_results_prefix(job_id: str, run_id: str) -> str:
    """Where the Distributed Map's ResultWriter puts <map run id>/manifest.json and the results."""
    return run_prefix(job_id, run_id) + "map-results"


def shard_rejects_key(job_id: str, run_id: str, index: int, segment: str = "") -> str:
    """A shard's rejects file; a Worker that may stop before the shard's end (logic/checkpoints.py)
    names its segment's own (`segment`: the checkpoint it starts from and the invocation), so
    two invocations never write one file."""
    suffix = f"-{segment}" if segment else ""
    return run_prefix(job_id, run_id) + f"rejects/{index:06d}{suffix}.jsonl"


def rejects_key(job_id: str, run_id: str) -> str:
    return run_prefix(job_id, run_id) + "rejects.jsonl"


def report_key(job_id: str, run_id: str) -> str:
    return run_prefix(job_id, run_id) + "report.json"


def graph_prefix(job_id: str, run_id: str) -> str:
    """Every staged file of a run (N-Quads, or openCypher CSV): the Neptune loader's `source`."""
    return run_prefix(job_id, run_id) + "graph/"


def graph_file_key(job_id: str, run_id: str, index: int, *, compressed: bool) -> str:
    # One text file per .gz (the loader reads gzip, never an archive).
    return graph_prefix(job_id, run_id) + f"{index:06d}.nq" + (".gz" if compressed else "")


def property_graph_keys(job_id: str, run_id: str, index: int, *, compressed: bool) -> tuple[str, str]:
    """A shard's openCypher CSV files (graph.model "property"): its vertices and its edges, apart
    (the loader reads a file's kind from its header, and loads vertex files before edge files)."""
    suffix = f"{index:06d}.csv" + (".gz" if compressed else "")
    prefix = graph_prefix(job_id, run_id)
    return prefix + "vertices/" + suffix, prefix + "edges/" + suffix


def graph_ids_keys(job_id: str, run_id: str, index: int) -> tuple[str, str]:
    """A property graph shard's staged vertex ids and the endpoint ids its own vertices do not
    cover, for the endpoint check before the load; outside graph/, which the loader reads whole."""
    prefix = run_prefix(job_id, run_id) + f"graph-ids/{index:06d}"
    return prefix + ".vertices.gz", prefix + ".endpoints.gz"


def sync_shard_key(job_id: str, plan_id: str, index: int) -> str:
    """writeMode sync: a shard's staged items, by bucket (shards/sync_staging.py)."""
    return f"jobs/{job_id}/{plan_id}/sync/shard-{index:06d}.jsonl.gz"


def sync_dataset_prefix(table: str, dataset: str) -> str:
    """writeMode sync: everything staged for a dataset's syncs (their merged buckets)."""
    return f"datasets/{table}/{dataset}/"


def sync_against(baseline: str | None) -> str:
    """The path segment naming the baseline a sync compares with: `first` (none), else `after-`
    and 16 hex digits of its prefix's SHA-256."""
    if not baseline:
        return "first"
    return "after-" + hashlib.sha256(baseline.encode()).hexdigest()[:16]


def sync_prefix(table: str, dataset: str, job_id: str, plan_id: str, baseline: str | None) -> str:
    """writeMode sync: where a run's merged buckets go, under the baseline it compares with (a
    re-run that finds another baseline writes elsewhere and redoes its buckets: the ledger keys
    them by baseline); once the run succeeds, the dataset's baseline (kept: not under jobs/,
    which expires). Finalize deletes the rest (`sync_stale`)."""
    return f"{sync_dataset_prefix(table, dataset)}{sync_against(baseline)}/{job_id}/{plan_id}/"


def sync_stale(keys: Iterable[str], table: str, dataset: str, baseline: str) -> list[str]:
    """The dataset's staged keys that no run can need once `baseline` is its baseline: all but
    the baseline's own and those of runs that compare with it (a running or re-run sync planned
    after the switch). Every other run compared with an earlier baseline: it can never switch
    (the switch is conditional on the baseline it compared with), and run again it compares
    with the current one under another prefix."""
    keep = (baseline, f"{sync_dataset_prefix(table, dataset)}{sync_against(baseline)}/")
    return [key for key in keys if not key.startswith(keep)]


def sync_bucket_key(prefix: str, bucket: int) -> str:
    """One merged bucket of a sync's (or baseline's) items under its prefix."""
    return f"{prefix}bucket-{bucket:05d}.jsonl.gz"


def bulk_items_prefix(job_id: str, plan_id: str) -> str:
    """dynamodb.engine bulkPutItems: every staged item object of a plan, and nothing else (the
    StartBulkPutItems S3KeyPrefix: the service reads every object under it)."""
    return f"jobs/{job_id}/{plan_id}/bulk/items/"


def bulk_items_key(job_id: str, plan_id: str, index: int, part: int = 0) -> str:
    """One staged object of a shard: DynamoDB JSON Lines, gzip. A shard's parts are cut at the
    same records on every attempt, so a retried shard overwrites its objects, never adds one."""
    return bulk_items_prefix(job_id, plan_id) + f"{index:06d}-{part:03d}.json.gz"


def bulk_lines_key(items_key: str) -> str:
    """The sidecar of a staged object (logic/bulk_sidecar.py): its records' source positions.
    Outside bulk/items/, which the service reads whole."""
    head, sep, name = items_key.rpartition("/bulk/items/")
    if not sep:
        raise ValueError(f"not a staged bulk object key: {items_key!r}")
    return f"{head}/bulk/lines/{name}"


def bulk_output_prefix(job_id: str, run_id: str) -> str:
    """Where the bulk put items operation of a run writes its reports and manifest."""
    return run_prefix(job_id, run_id) + "bulk-output/"
