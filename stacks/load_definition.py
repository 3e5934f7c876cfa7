"""The state machine's definition: Prepare → Plan → Shards (Distributed Map of Workers) → Sync? →
[Sync (Map of the Worker per bucket, writeMode sync)] → BulkPut? → [StartBulkPut → PollBulkPut ↺
(dynamodb.engine bulkPutItems: stacks/bulk_put.py)] → Finalize → Done.

With a graph target Finalize hands over to the graph load's loop (stacks/graph_load.py):
StartGraphLoad → PollGraphLoad → GraphLoaded? → GraphWait → PollGraphLoad ↺, until the load ends.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_stepfunctions as sfn
from aws_cdk import aws_stepfunctions_tasks as tasks
from constructs import Construct

from stacks.bulk_put import BulkPutLoop
from stacks.data import STAGING_JOBS_PREFIX
from stacks.graph_load import GraphLoadLoop
from stacks.lambda_tasks import (
    LAMBDA_SERVICE_ERRORS,
    LAMBDA_THROTTLE_ERRORS,
    THROTTLE_MAX_ATTEMPTS,
    THROTTLE_MAX_DELAY_SECONDS,
    TaskRetries,
    lambda_task,
    payload_fields,
)
from stacks.loader_functions import LoaderFunctions
from stacks.loader_settings import EXPRESS_MAX_SECONDS, WORKER_TASK_MARGIN_SECONDS, LoaderConfig
from stacks.settings import MaploadConfigError

# Worker-only retries: the runtime's ShardWriteError, a function that hit its own timeout
# (Lambda reports Sandbox.Timedout) and a Task that outlived its timeout.
WORKER_RETRY_ERRORS: Final[Sequence[str]] = ("ShardWriteError", "Sandbox.Timedout", "States.Timeout")
WORKER_RETRY_ATTEMPTS: Final[int] = 2
# A CSV shard whose predecessors have not published their start state yet (they may be waiting
# for a concurrency slot, themselves throttled for up to ~20 minutes): it waits as long, in Step
# Functions (the Worker gives up its slot after a short wait of its own), not in a Lambda.
CSV_START_PENDING_ERRORS: Final[Sequence[str]] = ("CsvStartPendingError",)
# What an EXPRESS child's fitted schedule must keep, or synth refuses the Worker timeout.
EXPRESS_MIN_THROTTLE_ATTEMPTS: Final[int] = 3
EXPRESS_MIN_CSV_START_ATTEMPTS: Final[int] = 1
FAILED_ERROR: Final[str] = "MaploadJobFailed"


class ManifestItemReader(sfn.S3JsonItemReader):
    """S3JsonItemReader whose IAM grant covers only the staging `jobs/` prefix.

    The stock reader grants s3:GetObject on the whole bucket; manifests only ever live under
    `jobs/`, so the state machine role gets exactly that prefix.
    """

    def __init__(self, *, bucket: s3.IBucket, key: str) -> None:
        super().__init__(bucket=bucket, key=key)
        self._manifest_bucket = bucket

    def provide_policy_statements(self) -> list[iam.PolicyStatement]:
        return [
            iam.PolicyStatement(
                actions=["s3:GetObject"],
                resources=[self._manifest_bucket.arn_for_objects(f"{STAGING_JOBS_PREFIX}*")],
            )
        ]


class MapResultWriter(sfn.ResultWriterV2):
    """ResultWriterV2 whose IAM grant covers only the staging `jobs/` prefix.

    The stock writer grants its four actions on every object of the bucket; the Map's results
    only ever go to jobs/<jobId>/<runId>/map-results/ (Plan's mapResultsPrefix). The actions are
    AWS's documented ones for ResultWriter (it writes large result files by multipart upload).
    """

    def __init__(self, *, bucket: s3.IBucket, prefix: str) -> None:
        super().__init__(bucket=bucket, prefix=prefix)
        self._results_bucket = bucket

    def provide_policy_statements(self) -> list[iam.PolicyStatement]:
        return [
            iam.PolicyStatement(
                actions=[
                    "s3:PutObject",
                    "s3:GetObject",
                    "s3:ListMultipartUploadParts",
                    "s3:AbortMultipartUpload",
                ],
                resources=[self._results_bucket.arn_for_objects(f"{STAGING_JOBS_PREFIX}*")],
            )
        ]


class LoadDefinition(Construct):
    """The states of one load, chained; `chain` is the state machine's definition.

    Finalize runs after a failed Prepare, Plan or Map too, so every execution writes a report;
    with a graph target, a succeeded job that staged graph files goes on to the graph load loop.
    States only: no resource of its own, so its construct path names no logical id.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        loader_config: LoaderConfig,
        functions: LoaderFunctions,
        staging_bucket: s3.IBucket,
    ) -> None:
        super().__init__(scope, construct_id)
        self._config = loader_config
        self._retries = TaskRetries.of(loader_config)
        execution = {
            "name": sfn.JsonPath.string_at("$$.Execution.Name"),
            "id": sfn.JsonPath.string_at("$$.Execution.Id"),
        }
        prepare = lambda_task(
            self,
            "Prepare",
            function=functions.prepare_function,
            payload=sfn.TaskInput.from_object({"input": sfn.JsonPath.object_at("$"), "execution": execution}),
            retries=self._retries,
            result_selector=payload_fields(
                {"preparedKey": "string", "objects": "number", "compressed": "number"}
            ),
            # Plan reads $.prepare from its input (and leaves it out of the spec).
            result_path="$.prepare",
        )
        plan = lambda_task(
            self,
            "Plan",
            function=functions.plan_function,
            payload=sfn.TaskInput.from_object({"input": sfn.JsonPath.object_at("$"), "execution": execution}),
            retries=self._retries,
            result_selector=payload_fields(
                {
                    "job": "object",
                    "manifestKey": "string",
                    "maxConcurrency": "number",
                    "shardCount": "number",
                    "mapResultsPrefix": "string",
                    "syncBuckets": "object",
                    "syncConcurrency": "number",
                    "bulkPut": "string",
                }
            ),
            result_path="$.plan",
        )
        shards = self._shards(functions.worker_function, staging_bucket)
        graph_enabled = functions.poll_graph_load_function is not None
        finalize = self._finalize(functions.finalize_function, execution, graph_enabled)
        # Its own path, so the report can say the error happened in Prepare.
        prepare.add_catch(finalize, errors=[sfn.Errors.ALL], result_path="$.prepareError")
        plan.add_catch(finalize, errors=[sfn.Errors.ALL], result_path="$.error")
        shards.add_catch(finalize, errors=[sfn.Errors.ALL], result_path="$.error")
        # dynamodb.engine bulkPutItems: the staged items handed off after the Map, before Finalize.
        synced = self._sync_choice(functions.worker_function, finalize, self._handoff(functions, finalize))
        done = self._done(functions, execution)
        finalize.next(done)
        self.chain: sfn.IChainable = prepare.next(plan).next(shards).next(synced)

    def _worker_retriers(self, worker_timeout_seconds: int) -> list[tuple[Sequence[str], int, int | None]]:
        """The Worker Task's retriers (errors, attempts, max delay) for a Worker timeout."""
        retriers = [
            *self._retries.lambda_errors(),
            (WORKER_RETRY_ERRORS, WORKER_RETRY_ATTEMPTS, None),
            (CSV_START_PENDING_ERRORS, THROTTLE_MAX_ATTEMPTS, THROTTLE_MAX_DELAY_SECONDS),
        ]
        if self._config.map_execution_type != "EXPRESS":
            return retriers
        # An EXPRESS child ends after 5 minutes, retries included: the whole schedule (every
        # attempt at its longest, every wait) is cut to fit, the cheap retries first. What does
        # not fit fails the shard; a re-run of the jobId resumes it.
        return self._retries.fitted(
            retriers,
            worker_timeout_seconds + WORKER_TASK_MARGIN_SECONDS,
            EXPRESS_MAX_SECONDS,
            priority=[
                LAMBDA_THROTTLE_ERRORS,
                CSV_START_PENDING_ERRORS,
                LAMBDA_SERVICE_ERRORS,
                WORKER_RETRY_ERRORS,
            ],
        )

    @staticmethod
    def _keeps_express_retries(retriers: Sequence[tuple[Sequence[str], int, int | None]]) -> bool:
        """Whether a fitted schedule still rides out a throttle and a pending CSV start: with no
        throttle retry, one Lambda throttle (any burst past the concurrency) fails the job."""
        kept = {tuple(errors): attempts for errors, attempts, _ in retriers}
        return (
            kept[tuple(LAMBDA_THROTTLE_ERRORS)] >= EXPRESS_MIN_THROTTLE_ATTEMPTS
            and kept[tuple(CSV_START_PENDING_ERRORS)] >= EXPRESS_MIN_CSV_START_ATTEMPTS
        )

    def _refuse_express_timeout(self) -> None:
        current = self._config.worker_timeout_seconds
        fits = (t for t in range(current - 1, 0, -1) if self._keeps_express_retries(self._worker_retriers(t)))
        largest = next(fits, None)
        raise MaploadConfigError(
            "worker_timeout_seconds",
            f"{current} with map_execution_type EXPRESS leaves the 5-minute child too little room for "
            f"its retries (at least {EXPRESS_MIN_THROTTLE_ATTEMPTS} on a Lambda throttle and "
            f"{EXPRESS_MIN_CSV_START_ATTEMPTS} on a pending CSV start): set worker_timeout_seconds "
            f"to at most {largest} or map_execution_type to STANDARD",
        )

    def _shards(self, worker_function: lambda_.IFunction, staging_bucket: s3.IBucket) -> sfn.DistributedMap:
        """One Worker per shard of Plan's manifest, as many at once as Plan allowed."""
        timeout = self._config.worker_timeout_seconds + WORKER_TASK_MARGIN_SECONDS
        worker = lambda_task(
            self,
            "Worker",
            function=worker_function,
            payload=sfn.TaskInput.from_object(
                {"shard": sfn.JsonPath.object_at("$.shard"), "job": sfn.JsonPath.object_at("$.job")}
            ),
            retries=None,
            result_selector={
                "index": sfn.JsonPath.number_at("$.Payload.index"),
                "more": sfn.JsonPath.string_at("$.Payload.more"),
            },
            result_path="$.turn",
            # A little beyond the function's own timeout: States.Timeout then means the
            # invocation itself hung, and the shard is retried.
            task_timeout=sfn.Timeout.duration(cdk.Duration.seconds(timeout)),
        )
        retriers = self._worker_retriers(self._config.worker_timeout_seconds)
        if self._config.map_execution_type == "EXPRESS" and not self._keeps_express_retries(retriers):
            self._refuse_express_timeout()
        for errors, attempts, max_delay in retriers:
            self._retries.add(worker, errors, attempts, max_delay)
        shards = sfn.DistributedMap(
            self,
            "ShardsMap",
            state_name="Shards",
            item_reader=ManifestItemReader(
                bucket=staging_bucket, key=sfn.JsonPath.string_at("$.plan.manifestKey")
            ),
            max_concurrency_path=sfn.JsonPath.string_at("$.plan.maxConcurrency"),
            item_selector={
                "shard": sfn.JsonPath.object_at("$$.Map.Item.Value"),
                "job": sfn.JsonPath.object_at("$.plan.job"),
            },
            # The children's outputs go to S3, never into state: collected, they would pass the
            # 256 KiB state limit at ~17,000 shards (States.DataLimitExceeded, which no Catch sees).
            result_writer_v2=MapResultWriter(
                bucket=staging_bucket, prefix=sfn.JsonPath.string_at("$.plan.mapResultsPrefix")
            ),
            result_path=sfn.JsonPath.DISCARD,
            # EXPRESS children cost less per shard but end after 5 minutes (checked in config).
            map_execution_type=sfn.StateMachineType[self._config.map_execution_type],
        )
        # A Worker that stopped before its deadline at a checkpoint (`more`) is invoked again and
        # resumes there (runtime/logic/checkpoints.py): a few history events a turn, each child
        # its own history (tests/infra/test_history.py bounds the turns).
        more = sfn.Choice(self, "MoreOfShard", state_name="MoreOfShard")
        done = sfn.Succeed(self, "ShardDone", state_name="ShardDone", output_path="$.turn")
        more.when(sfn.Condition.boolean_equals("$.turn.more", True), worker).otherwise(done)
        shards.item_processor(worker.next(more))
        return shards

    def _handoff(self, functions: LoaderFunctions, finalize: tasks.LambdaInvoke) -> sfn.Choice:
        """BulkPut? (stacks/bulk_put.py): a bulkPutItems job's hand-off, then Finalize."""
        loop = BulkPutLoop(
            self,
            "BulkPut",
            start_function=functions.start_bulk_put_function,
            poll_function=functions.poll_bulk_put_function,
            retries=self._retries,
            finalize=finalize,
        )
        return loop.choice

    def _sync_choice(
        self, worker_function: lambda_.IFunction, finalize: tasks.LambdaInvoke, otherwise: sfn.IChainable
    ) -> sfn.Choice:
        """Sync? after Shards: the Sync Map when Plan planned buckets (writeMode sync), then
        Finalize (also on the Map's error); `otherwise` (BulkPut?, then Finalize) if not."""
        syncs = self._syncs(worker_function)
        syncs.add_catch(finalize, errors=[sfn.Errors.ALL], result_path="$.error")
        synced = sfn.Choice(self, "SyncChoice", state_name="Sync?")
        has_buckets = sfn.Condition.is_present("$.plan.syncBuckets[0]")
        return synced.when(has_buckets, syncs.next(finalize)).otherwise(otherwise)

    def _syncs(self, worker_function: lambda_.IFunction) -> sfn.Map:
        """writeMode sync's second Map: one Worker per bucket of the dataset (Plan's `syncBuckets`,
        at most logic/sync.py MAX_BUCKETS: an inline Map's few events per bucket stay far below the
        execution's 25,000-event history, tests/infra/test_history.py), Plan's `syncConcurrency` at
        once, each comparing its bucket with the baseline and writing the difference
        (runtime/shards/sync_buckets.py)."""
        timeout = self._config.worker_timeout_seconds + WORKER_TASK_MARGIN_SECONDS
        sync_worker = lambda_task(
            self,
            "SyncWorker",
            function=worker_function,
            payload=sfn.TaskInput.from_object(
                {"bucket": sfn.JsonPath.number_at("$.bucket"), "job": sfn.JsonPath.object_at("$.job")}
            ),
            retries=None,
            # Only the bucket: the Map's collected output stays a few bytes a bucket.
            result_selector={"bucket": sfn.JsonPath.number_at("$.Payload.bucket")},
            task_timeout=sfn.Timeout.duration(cdk.Duration.seconds(timeout)),
        )
        for errors, attempts, max_delay in [
            *self._retries.lambda_errors(),
            (WORKER_RETRY_ERRORS, WORKER_RETRY_ATTEMPTS, None),
        ]:
            self._retries.add(sync_worker, errors, attempts, max_delay)
        syncs = sfn.Map(
            self,
            "SyncMap",
            state_name="Sync",
            items_path=sfn.JsonPath.string_at("$.plan.syncBuckets"),
            item_selector={
                "bucket": sfn.JsonPath.number_at("$$.Map.Item.Value"),
                "job": sfn.JsonPath.object_at("$.plan.job"),
            },
            # Plan's: maxConcurrency lowered under a budget, at most the inline Map's 40
            # (runtime/logic/sync.py `sync_workers`).
            max_concurrency_path=sfn.JsonPath.string_at("$.plan.syncConcurrency"),
            result_path=sfn.JsonPath.DISCARD,
        )
        syncs.item_processor(sync_worker)
        return syncs

    def _finalize(
        self, function: lambda_.IFunction, execution: Mapping[str, Any], graph_enabled: bool
    ) -> tasks.LambdaInvoke:
        """The report of every execution; with a graph target, whether a graph load follows."""
        return lambda_task(
            self,
            "Finalize",
            function=function,
            payload=sfn.TaskInput.from_object(
                {
                    "state": sfn.JsonPath.object_at("$"),
                    # The start time lets the report say how long the whole job took.
                    "execution": {**execution, "startTime": sfn.JsonPath.string_at("$$.Execution.StartTime")},
                }
            ),
            retries=self._retries,
            result_selector=payload_fields(
                {
                    "status": "string",
                    "jobId": "string",
                    "report": "object",
                    "reportUri": "string",
                    "error": "string",
                    "cause": "string",
                    **({"graphLoad": "string"} if graph_enabled else {}),
                }
            ),
            result_path="$.result",
        )

    def _done(self, functions: LoaderFunctions, execution: Mapping[str, Any]) -> sfn.Choice:
        """Succeeded or Failed by Finalize's status, through the graph load loop when it asks for one."""
        succeeded = sfn.Succeed(self, "SucceededState", state_name="Succeeded", output_path="$.result")
        failed = sfn.Fail(
            self,
            "FailedState",
            state_name="Failed",
            error=FAILED_ERROR,
            cause_path=sfn.JsonPath.string_at("$.result.cause"),
        )
        done = sfn.Choice(self, "DoneChoice", state_name="Done")
        start, poll = functions.start_graph_load_function, functions.poll_graph_load_function
        if start is not None and poll is not None:
            loop = GraphLoadLoop(
                self,
                "GraphLoad",
                start_function=start,
                poll_function=poll,
                retries=self._retries,
                execution=execution,
                succeeded=succeeded,
                failed=failed,
            )
            done.when(
                sfn.Condition.and_(
                    sfn.Condition.string_equals("$.result.status", "SUCCEEDED"),
                    sfn.Condition.boolean_equals("$.result.graphLoad", True),
                ),
                loop.start,
            )
        done.when(sfn.Condition.string_equals("$.result.status", "SUCCEEDED"), succeeded).otherwise(failed)
        return done
