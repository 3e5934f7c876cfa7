"""The Loader stack's settings (stacks/loader.py): function sizing, concurrency, retries, log retention."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any, Final, Literal, Self, get_args

from pydantic import AfterValidator, BeforeValidator, Field, model_validator

from stacks.settings import (
    INTEGER,
    KMS_KEY_ARN,
    NULLABLE,
    NUMBER,
    Count,
    Days,
    MaploadConfigError,
    Says,
    Site,
    as_integer,
    as_list,
    coerce_int,
    invalid,
    once,
    rule_error,
)

# Days CloudWatch Logs accepts as a retention period (anything else is rejected at deploy).
LOG_RETENTION_DAYS: Final[frozenset[int]] = frozenset(
    {1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192}
    | {2557, 2922, 3288, 3653}
)
Architecture = Literal["arm64", "x86_64"]
MapExecutionType = Literal["STANDARD", "EXPRESS"]
LAMBDA_ARCHITECTURES: Final[tuple[str, ...]] = get_args(Architecture)
MAP_EXECUTION_TYPES: Final[tuple[str, ...]] = get_args(MapExecutionType)
# A Distributed Map runs at most 10,000 child executions at once.
MAX_MAP_CONCURRENCY: Final[int] = 10_000
# An EXPRESS execution lasts at most 5 minutes; the Worker Task's timeout is the function's + 60 s.
EXPRESS_MAX_SECONDS: Final[int] = 300
WORKER_TASK_MARGIN_SECONDS: Final[int] = 60
# The longest bulk put items deadline: 7 days, 212 polls at most (runtime/logic/polling.py).
BULK_PUT_TIMEOUT_MAX_MINUTES: Final[int] = 10_080
# Lambda refuses a reserved concurrency that leaves the account fewer than 100 unreserved executions.
LAMBDA_UNRESERVED_MINIMUM: Final[int] = 100


def _not_zero(value: Any) -> Any:
    if value is not None and coerce_int(value) == 0:
        raise invalid(
            "0 would throttle every invocation of the Worker (Lambda runs none); null means no reservation"
        )
    return value


def _retention(days: int) -> int:
    if days not in LOG_RETENTION_DAYS:
        raise invalid(
            f"must be one of {', '.join(str(day) for day in sorted(LOG_RETENTION_DAYS))}, got {days}"
        )
    return days


MemoryMiB = Annotated[int, Field(ge=128, le=10240), INTEGER]
# Lambda's limit: at most 900 s.
TimeoutSeconds = Annotated[int, Field(ge=1, le=900), INTEGER]
BucketName = Annotated[
    str, Field(min_length=3, max_length=63, pattern=r"^[a-z0-9](\.?[a-z0-9-])*\.?[a-z0-9]$")
]
KmsKeyArn = Annotated[str, Field(pattern=rf"^{KMS_KEY_ARN}$")]


class LoaderConfig(Site):
    """What the Loader stack reads: function sizing, concurrency, retries, log retention."""

    source_extra_buckets: Annotated[
        tuple[BucketName, ...],
        BeforeValidator(as_list),
        AfterValidator(once("bucket")),
        Field(
            alias="extra_source_buckets",
            description="buckets, besides the stack's source bucket, that an execution's `source` may "
            "name; IAM grants read on exactly these",
        ),
        Says("a list of bucket names", item="an S3 bucket name"),
    ] = ()
    source_kms_keys: Annotated[
        tuple[KmsKeyArn, ...],
        BeforeValidator(as_list),
        Field(
            description="KMS key ARNs that source objects may be encrypted with (SSE-KMS, customer managed "
            "keys); Prepare, Plan and Worker get `kms:Decrypt` on exactly these, only via S3 "
            "(`kms:ViaService`). The key policy must also allow the functions' roles"
        ),
        Says("a list of KMS key ARNs", item="a KMS key ARN (arn:aws:kms:REGION:ACCOUNT:key/ID)"),
    ] = ()
    max_concurrency_cap: Annotated[
        int,
        Field(
            ge=1,
            le=MAX_MAP_CONCURRENCY,
            description="upper bound for the input's `maxConcurrency` (Distributed Map child executions in "
            "flight); at most `worker_reserved_concurrency` when the Worker has one, else at most "
            "`lambda_concurrency_limit` (synth fails naming both)",
        ),
        INTEGER,
    ] = 100
    worker_reserved_concurrency: Annotated[
        int | None,
        Field(
            ge=1,
            le=10_000_000,
            description="concurrent executions reserved for the Worker function, or `null` (the default) for "
            "none. A reservation keeps a full-width load from starving the account's other functions and "
            "the Worker from being throttled below `max_concurrency_cap` (which must then be at most it); "
            "but Lambda refuses at deploy a reservation that leaves fewer than "
            f"{LAMBDA_UNRESERVED_MINIMUM} executions of the account's quota unreserved, counting every "
            "function of the account and region, and a new account's quota may be far below 1,000. So it "
            "may be at most `lambda_concurrency_limit` − "
            f"{LAMBDA_UNRESERVED_MINIMUM}, and the reservations of all environments of cdk.json that "
            "deploy to one account and region (`account`/`region` null: the CLI's, so one group with "
            "an environment naming the same) add up "
            "against it (synth fails naming them). 0 is refused: it would throttle every invocation. "
            "Without one, a throttled invocation still waits (the state machine retries "
            "`Lambda.TooManyRequestsException` 40 times, at most 60 s apart) rather than failing the "
            'job. To reserve: raise the account\'s quota (Service Quotas, "Concurrent executions"), '
            "set `lambda_concurrency_limit` to it, then this",
        ),
        BeforeValidator(lambda value: _not_zero(as_integer(value))),
        NULLABLE,
    ] = None
    worker_memory_mib: Annotated[
        MemoryMiB,
        Field(
            description="the Worker function's memory, and Prepare's. A property graph Worker holds its "
            "shard's ids in memory, so Plan (which gets this setting as `WORKER_MEMORY_MIB`) refuses a "
            "property graph input whose `shardSizeMiB` is more than the Worker holds, naming the largest "
            "allowed: 26 at 512 MiB, 71 at 1,024, 86 at 1,536, 153 at 2,048, 213 at 3,008, 691 at 10,240, "
            "for ids that are a field as it is (longer ids a template makes allow less; measured by "
            '`bench/shard_memory.py`: docs/NEPTUNE.md, "Edge endpoints are checked before the load", Size); '
            "a property graph input that gives no `shardSizeMiB` gets the largest, up to the default 64"
        ),
    ] = 1024
    worker_timeout_seconds: Annotated[
        TimeoutSeconds,
        Field(
            description="the Worker function's timeout, and Prepare's (decompression of gzip/zip sources: "
            'the timeout bounds how much one execution can decompress, docs/INPUT.md, "Compressed sources")'
        ),
    ] = 900
    control_memory_mib: Annotated[
        MemoryMiB,
        Field(
            description="the memory of Plan (and of the graph-load functions); Plan's CPU grows with it "
            "(one vCPU at 1,769), and with it how many objects Plan reads in its timeout"
        ),
    ] = 512
    control_timeout_seconds: Annotated[
        TimeoutSeconds,
        Field(
            description="the timeout of Plan (and of the graph-load functions). Plan refuses a source with "
            "more objects whose CSV header or Parquet footer it reads than fit in half of it: 21,273 at "
            '300 s and 512 MiB, 100,000 at 900 s and 1,769 MiB (docs/INPUT.md, "How many objects")'
        ),
    ] = 300
    worker_ephemeral_storage_mib: Annotated[
        int,
        Field(
            ge=512,
            le=10240,
            description="the Worker's and Prepare's `/tmp` (Lambda allows 512 to 10,240 MB). Neither spools "
            "data there: a shard's rejects and staged graph file stream to staging as multipart uploads "
            "while the shard is read (one 8 MiB part in memory each), Prepare streams decompressed data "
            "the same way; the setting is headroom for the runtime and libraries",
        ),
        INTEGER,
    ] = 2048
    finalize_memory_mib: Annotated[
        MemoryMiB,
        Field(
            description="Finalize's memory: it reads every shard's ledger item (up to 100,000) and streams "
            "the merged rejects to S3 in parts of 8 MiB that grow with what was sent (80 MiB at 100 GiB of "
            "rejects; 10,000 parts hold S3's 5 TiB) (`tests/runtime/test_finalize_scale.py` measures it "
            "at 100,000 shards)"
        ),
    ] = 1024
    finalize_timeout_seconds: Annotated[TimeoutSeconds, Field(description="Finalize's timeout")] = 900
    write_concurrency: Annotated[
        int,
        Field(
            ge=1,
            le=256,
            description="write requests in flight per worker for a 20 ms round trip; each worker narrows it "
            "while DynamoDB throttles (AIMD) and widens it again as requests succeed. At 20 ms round trip, "
            "8–16 keep one worker busy (see docs/PERFORMANCE.md); a longer quickest round trip widens the "
            "cap in proportion, up to `max_write_concurrency`",
        ),
        INTEGER,
    ] = 8
    max_write_concurrency: Annotated[
        int,
        Field(
            ge=1,
            le=256,
            description="the most write requests in flight per worker however long the round trip: the "
            "cap `write_concurrency` × (quickest round trip ÷ 20 ms) stops here (at least "
            "`write_concurrency`; the Worker's sending threads and HTTP connections follow it)",
        ),
        INTEGER,
    ] = 64
    lambda_concurrency_limit: Annotated[
        Count,
        Field(
            description="the account's concurrent Lambda executions (its quota) available to this loader; "
            f"`worker_reserved_concurrency` may be at most this − {LAMBDA_UNRESERVED_MINIMUM} (synth fails "
            "naming both), so a job never asks for more Workers than Lambda would run — raise it together "
            "with the quota"
        ),
    ] = 1000
    lambda_architecture: Annotated[
        Architecture,
        Field(description="`arm64` or `x86_64`, for every function (arm64 costs less per GB-s)"),
    ] = "arm64"
    map_execution_type: Annotated[
        MapExecutionType,
        Field(
            description="the Distributed Map's child executions: `STANDARD`, or `EXPRESS` (cheaper per "
            f"shard, but an EXPRESS execution ends after {EXPRESS_MAX_SECONDS // 60} minutes, "
            "retries included: the Worker's retry schedule (every attempt and wait at its longest) "
            "is cut to fit them, throttling and CSV start retries first, so a shorter "
            "`worker_timeout_seconds` keeps more retries; it must keep at least 3 throttling "
            "retries and 1 CSV start retry, so `worker_timeout_seconds` must be at most 146 with "
            "the default retry settings — synth fails otherwise, naming the largest — and "
            "`shardSizeMiB` small enough for a shard to finish in that time (under a "
            "`writeUnitsPerSecond` budget Plan refuses a job whose shard it estimates at longer); a "
            "shard whose retries ran out fails the job, and a re-run of the jobId resumes it)"
        ),
    ] = "STANDARD"
    # Step Functions rejects an IntervalSeconds below 1 (and so does moto's interpreter).
    retry_interval_seconds: Annotated[
        int,
        Field(
            ge=1,
            le=3600,
            description="seconds before the state machine's first retry of Lambda service errors and "
            "throttling (full jitter)",
        ),
        INTEGER,
    ] = 2
    retry_max_attempts: Annotated[
        int,
        Field(
            ge=0,
            le=20,
            description="attempts of the state machine's retry of Lambda service errors and throttling",
        ),
        INTEGER,
    ] = 6
    retry_backoff_rate: Annotated[
        float,
        Field(
            ge=1.0,
            le=10.0,
            description="backoff rate of the state machine's retry of Lambda service errors and throttling",
        ),
        NUMBER,
    ] = 2.0
    ledger_ttl_days: Annotated[Days, Field(description="how long ledger items (jobs, shards) are kept")] = 30
    bulk_put_timeout_minutes: Annotated[
        int,
        Field(
            ge=1,
            le=BULK_PUT_TIMEOUT_MAX_MINUTES,
            description="dynamodb.engine bulkPutItems: how long after its start PollBulkPut lets a job's "
            "bulk put items operation run; past it the operation is cancelled and the job fails naming it "
            "(the poll interval grows with the operation's age, so the loop stays within the execution's "
            "history)",
        ),
    ] = 1440
    log_retention_days: Annotated[
        int,
        Field(
            ge=1,
            le=3653,
            description="CloudWatch Logs retention of the functions and the state machine (a value "
            f"CloudWatch accepts: {', '.join(str(day) for day in sorted(LOG_RETENTION_DAYS))})",
        ),
        INTEGER,
        AfterValidator(_retention),
    ] = 30

    @property
    def retain_logs(self) -> bool:
        """Log groups outlive the stack with the data (`retain_data`)."""
        return self.retain_data

    @model_validator(mode="after")
    def _concurrency_and_express(self) -> Self:
        if self.max_write_concurrency < self.write_concurrency:
            raise rule_error(
                "max_write_concurrency",
                f"{self.max_write_concurrency} must be at least write_concurrency {self.write_concurrency}",
            )
        reserved = self.worker_reserved_concurrency
        reservable = self.lambda_concurrency_limit - LAMBDA_UNRESERVED_MINIMUM
        if reserved is not None and reserved > reservable:
            raise rule_error(
                "worker_reserved_concurrency",
                f"{reserved} must leave Lambda's {LAMBDA_UNRESERVED_MINIMUM} "
                "unreserved executions of lambda_concurrency_limit (the account's quota) "
                f"{self.lambda_concurrency_limit}: at most {reservable}; lower it, set it to null (no "
                "reservation), or raise the quota and lambda_concurrency_limit",
            )
        if reserved is not None and self.max_concurrency_cap > reserved:
            raise rule_error(
                "max_concurrency_cap",
                f"{self.max_concurrency_cap} shards in flight need as many Worker executions, but "
                f"worker_reserved_concurrency is {reserved}: lower "
                "max_concurrency_cap or raise worker_reserved_concurrency",
            )
        if reserved is None and self.max_concurrency_cap > self.lambda_concurrency_limit:
            raise rule_error(
                "max_concurrency_cap",
                f"{self.max_concurrency_cap} shards in flight need as many Worker executions, but "
                f"lambda_concurrency_limit (the account's quota) is {self.lambda_concurrency_limit}: lower "
                "max_concurrency_cap or raise the quota and lambda_concurrency_limit",
            )
        limit = EXPRESS_MAX_SECONDS - WORKER_TASK_MARGIN_SECONDS
        if self.map_execution_type == "EXPRESS" and self.worker_timeout_seconds > limit:
            raise rule_error(
                "map_execution_type",
                f"EXPRESS child executions end after {EXPRESS_MAX_SECONDS} s, but a Worker may run "
                f"worker_timeout_seconds={self.worker_timeout_seconds} (+{WORKER_TASK_MARGIN_SECONDS} s); "
                f"set worker_timeout_seconds to at most {limit} (and shardSizeMiB small enough) "
                "or use STANDARD",
            )
        return self


def check_reservations(
    environments: Sequence[LoaderConfig], cli_account: str | None = None, cli_region: str | None = None
) -> None:
    """Lambda's unreserved minimum is per account and region: the Worker reservations of the
    environments that deploy to one account and region add up against it.

    An environment whose `account` (or `region`) is null deploys to the CLI's (`cli_account`,
    `cli_region`: CDK_DEFAULT_*, as `check_existing_table` compares), so it shares a group with
    an environment that names that account; when the CLI's is unknown too, those are taken as one
    account (region), the case of one user deploying them all. The group's quota is the least
    `lambda_concurrency_limit` among them.
    """
    unknown = "null, the CLI's"
    groups: dict[tuple[str | None, str | None], list[LoaderConfig]] = {}
    for config in environments:
        groups.setdefault((config.account or cli_account, config.region or cli_region), []).append(config)
    for (account, region), members in groups.items():
        reserving = [config for config in members if config.worker_reserved_concurrency is not None]
        if len(reserving) < 2:
            continue  # one environment's reservation is checked against its own limit
        total = sum(config.worker_reserved_concurrency or 0 for config in reserving)
        quota = min(config.lambda_concurrency_limit for config in members)
        if total > quota - LAMBDA_UNRESERVED_MINIMUM:
            here = {"account": account, "region": region}
            where = ", ".join(f"{key} {value or unknown}" for key, value in here.items())
            shares = " + ".join(f"{c.name} {c.worker_reserved_concurrency}" for c in reserving)
            raise MaploadConfigError(
                f"mapload.environments.{reserving[-1].name}.worker_reserved_concurrency",
                f"environments deploying to one account and region ({where}) reserve {shares} = "
                f"{total} Worker executions, but Lambda keeps {LAMBDA_UNRESERVED_MINIMUM} of the "
                f"account's quota (lambda_concurrency_limit {quota}) unreserved: at most "
                f"{quota - LAMBDA_UNRESERVED_MINIMUM} in all; lower them, set some to null (no "
                "reservation), or give the environments their own account or region",
            )
