"""The Graph stack's settings (stacks/graph.py): whether there is one, its size, engine and backups."""

from __future__ import annotations

import re
from typing import Annotated, Final, Self

from pydantic import AfterValidator, BeforeValidator, Field, model_validator

from stacks.settings import FLAG, INTEGER, NUMBER, Says, Site, as_list, invalid, once, rule_error

# The oldest Neptune engine the Graph stack works with. Its IAM grants Neptune's fine-grained data
# actions (neptune-db:StartLoaderJob, GetLoaderJobStatus, ReadDataViaQuery, ...), which Neptune
# supports from engine 1.2.0.0 (Neptune User Guide, "IAM actions for data access"); openCypher
# (the property graph's load format and the endpoint check's query) needs 1.1.1.0, so 1.2.0.0
# covers both. Releases before 1.2.0.0 also used parameter group family neptune1, not neptune1.x.
MIN_GRAPH_ENGINE_VERSION: Final[str] = "1.2.0.0"
# A Neptune DB subnet group needs subnets in at least two AZs.
GRAPH_MIN_AZS: Final[int] = 2


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))


def _engine_at_least_minimum(version: str) -> str:
    if _version(version) < _version(MIN_GRAPH_ENGINE_VERSION):
        raise invalid(
            f"must be {MIN_GRAPH_ENGINE_VERSION} or later, got {version!r}: the stack's IAM grants Neptune's "
            "fine-grained data actions (neptune-db:StartLoaderJob, GetLoaderJobStatus, "
            "ReadDataViaQuery, ...), which older engines do not support (openCypher, too, "
            "needs 1.1.1.0)"
        )
    return version


class GraphConfig(Site):
    """What the Graph stack reads: whether there is one, the cluster's size, engine and backups."""

    graph_enabled: Annotated[
        bool,
        Field(
            description="build the Graph stack (VPC, Neptune, loader role) and the graph-load functions; "
            "`false`: no Neptune, and Plan refuses a graph input. Off in `dev` by default: the cluster "
            "costs ~$117 a month idle at its 1-NCU floor (docs/DEPLOY.md); cdk.json states it in each "
            "environment's block. `mapload run-local` builds the graph whatever it says. On a deployed "
            "environment with a cluster, `make deploy` refuses `false` (it would delete the graph)"
        ),
        FLAG,
    ] = True
    instance_class: Annotated[
        str,
        Field(
            alias="graph_instance_class",
            pattern=r"^db\.(serverless|[a-z0-9]+\.[a-z0-9]+)$",
            description="`db.serverless` (capacity from the two settings below) or a provisioned Neptune "
            "class such as `db.r6g.large`",
        ),
        Says('"db.serverless" or a Neptune instance class like db.r6g.large'),
    ] = "db.serverless"
    instances: Annotated[
        int,
        Field(
            alias="graph_instances",
            ge=1,
            le=16,
            description="cluster instances (1..16); a second one is a failover reader in the other AZ",
        ),
        INTEGER,
    ] = 1
    serverless_min_capacity: Annotated[
        float,
        Field(
            alias="graph_serverless_min_capacity",
            ge=1.0,
            le=128.0,
            description="the fewest Neptune capacity units when serverless (1..128, at most "
            "`graph_serverless_max_capacity`)",
        ),
        NUMBER,
    ] = 1.0
    serverless_max_capacity: Annotated[
        float,
        Field(
            alias="graph_serverless_max_capacity",
            ge=2.5,
            le=128.0,
            description="the most Neptune capacity units when serverless (2.5..128)",
        ),
        NUMBER,
    ] = 8.0
    engine_version: Annotated[
        str,
        Field(
            alias="graph_engine_version",
            pattern=r"^1\.[0-9]+\.[0-9]+\.[0-9]+$",
            description=f"the Neptune engine version, at least {MIN_GRAPH_ENGINE_VERSION} (synth fails "
            "otherwise, naming the minimum): the functions hold Neptune's fine-grained data actions "
            "(`neptune-db:StartLoaderJob`, `GetLoaderJobStatus`, `ReadDataViaQuery`, ...), which older "
            "engines do not support, and openCypher needs 1.1.1.0. The cluster parameter group family "
            "follows it (`neptune1.4`)",
        ),
        AfterValidator(_engine_at_least_minimum),
        Says("a Neptune engine version like 1.4.5.1"),
    ] = "1.4.5.1"
    backup_retention_days: Annotated[
        int,
        Field(
            alias="graph_backup_retention_days",
            ge=1,
            le=35,
            description="automated backups kept (1..35, as Neptune allows); with `retain_data` the cluster "
            "also has deletion protection and leaves a final snapshot",
        ),
        INTEGER,
    ] = 7
    availability_zones: Annotated[
        tuple[str, ...],
        BeforeValidator(as_list),
        AfterValidator(once("zone")),
        Field(
            alias="graph_availability_zones",
            description="the Graph VPC's availability zones by name (two or more of the environment's "
            "region, e.g. `eu-west-2a`); empty: the region's first two, picked at deploy. Set it where "
            "Lambda does not support an AZ id that the first two map to in your account (the graph "
            "functions' subnets would fail to create): see docs/DEPLOY.md",
        ),
        Says("a list of availability zone names", item="an availability zone name like eu-west-2a"),
    ] = ()

    @model_validator(mode="after")
    def _zones_of_the_region(self) -> Self:
        zones = self.availability_zones
        if zones and len(zones) < GRAPH_MIN_AZS:
            raise rule_error(
                "graph_availability_zones",
                f"must name at least {GRAPH_MIN_AZS} zones (a Neptune subnet group spans two AZs), "
                f"got {len(zones)}",
            )
        for zone in zones:
            if not re.fullmatch(r"[a-z]{2}(-[a-z]+)+-[0-9]+[a-z]", zone) or (
                self.region is not None and zone[:-1] != self.region
            ):
                raise rule_error(
                    "graph_availability_zones",
                    f"must be zone names of the environment's region ({self.region or 'any region'}, "
                    f"like eu-west-2a; not zone ids), got {zone!r}",
                )
        return self

    @property
    def retain(self) -> bool:
        """Deletion protection on the cluster, snapshot on stack deletion (`retain_data`)."""
        return self.retain_data

    @model_validator(mode="after")
    def _capacity_range(self) -> Self:
        if self.serverless_min_capacity > self.serverless_max_capacity:
            raise rule_error(
                "graph_serverless_min_capacity",
                f"must not exceed graph_serverless_max_capacity ({self.serverless_max_capacity:g})",
            )
        return self

    @property
    def serverless(self) -> bool:
        return self.instance_class == "db.serverless"

    @property
    def parameter_group_family(self) -> str:
        major_minor = ".".join(self.engine_version.split(".")[:2])
        return f"neptune{major_minor}"
