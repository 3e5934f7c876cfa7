"""What an environment costs a month when nothing runs, read from its synthesized templates.

Printed by every synth the CLI runs (`make deploy`, `make synth`) before anything is deployed, so
that the Neptune cluster's floor (~$117 a month at the serverless minimum) is a number seen
before it is paid. Only what bills by the hour or month whatever the load: Neptune instances
(serverless at their minimum capacity), KMS keys, CloudWatch alarms and dashboards. Storage,
requests, Lambda, Step Functions and on-demand DynamoDB cost nothing idle and are left out.

Prices: us-east-1 on-demand list prices, as AWS's pricing pages and the summaries below gave them
on 2026-12-07 (other regions differ by up to ~30%): Neptune serverless $0.1608 per NCU-hour and
db.r6g.large $0.348 an hour (awsnegotiations.com "Amazon Neptune Serverless Pricing", May 2026;
usage.ai "Neptune pricing" 2026), a KMS customer managed key $1 a month, a standard-resolution
alarm $0.10 a month, a dashboard $3 a month (beyond the account's three free ones).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

HOURS_A_MONTH: Final[float] = 730.0
NEPTUNE_NCU_HOUR: Final[float] = 0.1608
# Provisioned Neptune classes with a sourced price; any other class is named without one.
NEPTUNE_INSTANCE_HOUR: Final[Mapping[str, float]] = {"db.r6g.large": 0.348}
KMS_KEY_MONTH: Final[float] = 1.0
ALARM_MONTH: Final[float] = 0.10
DASHBOARD_MONTH: Final[float] = 3.0


def idle_costs(templates: Mapping[str, Mapping[str, Any]]) -> list[tuple[str, float | None]]:
    """(what, dollars a month or None when the price is not known here) for each idle cost of
    the templates (stack name -> template)."""
    costs: list[tuple[str, float | None]] = []
    for template in templates.values():
        resources = (template.get("Resources") or {}).values()
        floor = next(
            (
                float(r["Properties"]["ServerlessScalingConfiguration"]["MinCapacity"])
                for r in resources
                if r.get("Type") == "AWS::Neptune::DBCluster"
                and (r.get("Properties") or {}).get("ServerlessScalingConfiguration")
            ),
            None,
        )
        for resource in resources:
            kind, props = resource.get("Type"), resource.get("Properties") or {}
            if kind == "AWS::Neptune::DBInstance":
                klass = str(props.get("DBInstanceClass"))
                if klass == "db.serverless" and floor is not None:
                    costs.append(
                        (
                            f"Neptune db.serverless instance at {floor:g} NCU",
                            floor * NEPTUNE_NCU_HOUR * HOURS_A_MONTH,
                        )
                    )
                else:
                    hourly = NEPTUNE_INSTANCE_HOUR.get(klass)
                    costs.append(
                        (f"Neptune {klass} instance", None if hourly is None else hourly * HOURS_A_MONTH)
                    )
            elif kind == "AWS::KMS::Key":
                costs.append(("KMS key", KMS_KEY_MONTH))
            elif kind == "AWS::CloudWatch::Alarm":
                costs.append(("CloudWatch alarm", ALARM_MONTH))
            elif kind == "AWS::CloudWatch::Dashboard":
                costs.append(("CloudWatch dashboard", DASHBOARD_MONTH))
    return costs


def idle_cost_line(stage: str, templates: Mapping[str, Mapping[str, Any]]) -> str:
    """One line: the monthly total and its parts, largest first."""
    costs = idle_costs(templates)
    grouped: dict[str, tuple[int, float | None]] = {}
    for what, dollars in costs:
        count, total = grouped.get(what, (0, 0.0))
        grouped[what] = (count + 1, None if dollars is None or total is None else total + dollars)
    known = sum(total for _, total in grouped.values() if total is not None)
    parts = sorted(grouped.items(), key=lambda item: -(item[1][1] or 0.0))
    described = ", ".join(
        f"{count} × {what} {'(price unknown here)' if total is None else f'${total:,.2f}'}"
        for what, (count, total) in parts
    )
    unknown = " + instances priced elsewhere" if any(total is None for _, total in grouped.values()) else ""
    graph = "" if any("Neptune" in what for what in grouped) else "; no Neptune (graph_enabled: false)"
    return (
        f"mapload: {stage} costs about ${known:,.2f} a month idle{unknown} (us-east-1 list prices, "
        f"docs/DEPLOY.md): {described or 'nothing billed by the hour'}{graph}"
    )
