"""The monitoring's settings (stacks/monitoring.py): where alarms go and when they fire."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from stacks.settings import NULLABLE, NUMBER, Count, Says, Section


class MonitoringConfig(Section):
    """What the dashboard and alarms read: where alarms go and when they fire."""

    alarm_email: Annotated[
        str | None,
        Field(
            pattern=r"^[^@\s]+@[^@\s]+\.[^@\s]+$",
            description="e-mail address subscribed to the environment's alarm topic (null: the topic has no "
            "subscription; add your own)",
        ),
        NULLABLE,
        Says("an e-mail address or null"),
    ] = None
    alarm_rejected_percent: Annotated[
        float,
        Field(
            ge=0.0,
            le=100.0,
            description="alarm when rejected records exceed this percentage of records read in 5 minutes "
            "(0..100)",
        ),
        NUMBER,
    ] = 1.0
    alarm_throttle_events: Annotated[
        Count,
        Field(
            description="alarm when more than this many DynamoDB writes are throttled per 5 minutes, three "
            "periods in a row"
        ),
    ] = 1000
