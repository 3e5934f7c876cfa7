"""What a shard stages in S3 besides items: its rejects file and its graph files, and their keys."""

from __future__ import annotations

import contextlib
from typing import Any

from adapters.property_graph import PropertyGraphStager
from adapters.rdf import GraphStager
from adapters.s3 import S3Store
from logic import layout, opencypher
from logic.endpoints import encode_ids, text_size
from logic.job import ManifestEntry
from logic.property_graph import headers
from logic.spec.inputs import JobSpec
from shards.rejects import RejectSink
from shards.settings import ShardSettings

Stager = GraphStager | PropertyGraphStager


def sinks(
    outputs: contextlib.ExitStack,
    store: S3Store,
    settings: ShardSettings,
    spec: JobSpec,
    shard: ManifestEntry,
    source: str,
    rejects_key: str,
    graph_keys: tuple[str, ...],
    line_base: int = 0,
) -> tuple[RejectSink, Stager | None]:
    """The shard's rejects and (unless the job has no graph, or is a dry run) its staged statements,
    each an upload closed with `outputs`."""
    # A shard of a decompressed copy (Prepare) names the original source and zip member.
    rejects = RejectSink(
        source,
        shard.member,
        line_base=line_base,
        out=outputs.enter_context(
            store.upload_if_written(settings.staging_bucket, rejects_key, "application/x-ndjson")
        ),
    )
    if spec.graph is None or spec.dry_run:  # a dry run stages nothing
        return rejects, None
    if spec.graph.model == "property":
        vertices_key, edges_key = graph_keys
        # openCypher sources keep their own header (one per object, so one per shard).
        own = opencypher.parse_header(shard.header or []) if spec.format == "opencypher" else None
        return rejects, PropertyGraphStager(
            (own, own) if own is not None else headers(spec),
            compress=spec.graph.gzip,
            vertices=outputs.enter_context(
                store.upload_if_written(settings.staging_bucket, vertices_key, "text/csv")
            ),
            edges=outputs.enter_context(
                store.upload_if_written(settings.staging_bucket, edges_key, "text/csv")
            ),
        )
    graph = GraphStager(
        compress=spec.graph.gzip,
        out=outputs.enter_context(
            store.upload_if_written(settings.staging_bucket, graph_keys[0], "application/n-quads")
        ),
    )
    return rejects, graph


def outputs(
    rejects: RejectSink, rejects_key: str, graph: Stager | None, graph_keys: tuple[str, ...]
) -> dict[str, Any]:
    """What the shard wrote besides items: its rejects and staged statements (or vertices and
    edges), and their keys."""
    outputs = {
        "byReason": dict(rejects.by_reason),
        "sample": rejects.sample,
        "rejectsKey": rejects_key if rejects.count else None,
        "graphStaged": graph.staged if graph is not None else 0,
        "graphKey": graph_keys[0] if graph is not None and graph.staged else None,
    }
    if isinstance(graph, PropertyGraphStager):
        outputs |= {
            "graphKey": graph_keys[0] if graph.vertices else graph_keys[1] if graph.edges else None,
            "graphVertices": graph.vertices,
            "graphEdges": graph.edges,
            "graphSkippedVertices": graph.skipped_vertices,
            "graphSkippedEdges": graph.skipped_edges,
            # The endpoint check's passes are sized by the sums over shards (report.graph_section).
            "graphOpenEndpoints": graph.ids.opened,
            "graphOpenEndpointBytes": graph.ids.opened_bytes,
        }
    return outputs


def finish_graph(graph: Stager | None, store: S3Store, bucket: str, keys: tuple[str, str]) -> None:
    """Write what the stager buffered; for a property graph also the shard's vertex ids and open
    endpoints (logic/endpoints.py), one file each, before the shard is recorded done. Written for
    every such shard (even empty) so the check reads known keys: S3 answers a missing key with
    403, not 404, to a reader without s3:ListBucket."""
    if graph is not None:
        graph.finish()
    if not isinstance(graph, PropertyGraphStager):
        return
    vertices_key, endpoints_key = keys
    store.put_bytes(bucket, vertices_key, encode_ids(sorted(graph.ids.vertices)), "application/gzip")
    opened = encode_ids(graph.ids.open_endpoints())
    graph.ids.opened_bytes = text_size(opened)
    store.put_bytes(bucket, endpoints_key, opened, "application/gzip")


def graph_keys(spec: JobSpec, job_id: str, plan_id: str, index: int) -> tuple[str, ...]:
    """Where the shard stages its graph: one N-Quads file, or a property graph's vertex and edge files."""
    compressed = bool(spec.graph and spec.graph.gzip)
    if spec.graph is not None and spec.graph.model == "property":
        return layout.property_graph_keys(job_id, plan_id, index, compressed=compressed)
    return (layout.graph_file_key(job_id, plan_id, index, compressed=compressed),)


def origin(source: str, member: str | None) -> str:
    """The records' object and zip member: what a property graph's default edge ids derive from."""
    return f"{source}#{member}" if member else source
