"""Prepare: decompress the gzip and zip sources into plain objects in staging and list what Plan must
shard (archives/service.py) with the function's clients."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from adapters import clients
from adapters.s3 import S3Store
from archives.service import prepare
from handlers.observability import entry_point
from handlers.settings import PrepareSettings

SETTINGS_CLASS = PrepareSettings


def handle(event: Mapping[str, Any], env: Mapping[str, str]) -> dict[str, Any]:
    """The event is the execution's `input` and its `execution`; the result is the prepared
    objects' listing (`preparedKey`, None when nothing is compressed) and their counts."""
    settings = PrepareSettings.from_env(env)
    client = clients.s3()
    return prepare(event, settings, client, S3Store(client))


@entry_point("Prepare")
def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return handle(event, os.environ)
