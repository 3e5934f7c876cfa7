"""Where a job's files live in the staging bucket (docs/CONTRACTS.md, "Staging bucket layout")."""

from __future__ import annotations


def run_prefix(job_id: str, run_id: str) -> str:
    return f"jobs/{job_id}/{run_id}/"


def manifest_key(job_id: str, run_id: str) -> str:
    return run_prefix(job_id, run_id) + "manifest.json"


def shard_rejects_key(job_id: str, run_id: str, index: int) -> str:
    return run_prefix(job_id, run_id) + f"rejects/{index:06d}.jsonl"


def rejects_key(job_id: str, run_id: str) -> str:
    return run_prefix(job_id, run_id) + "rejects.jsonl"


def report_key(job_id: str, run_id: str) -> str:
    return run_prefix(job_id, run_id) + "report.json"
