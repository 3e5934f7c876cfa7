"""Group items into BatchWriteItem-sized batches of distinct keys (later duplicates replace earlier ones)."""

from __future__ import annotations

from typing import Any, Final

from logic.values import Item

__all__ = ["BATCH_ITEMS", "Batcher"]

# Puts per BatchWriteItem request (DynamoDB's limit).
BATCH_ITEMS: Final = 25


class Batcher:
    """Collects items until `size` distinct keys are open, then hands the batch out.

    DynamoDB refuses a BatchWriteItem that names one key twice, so an item whose key is already
    in the open batch replaces the earlier one (the later line of the file wins, as one PutItem
    after another would) and counts in `duplicates`. Items with equal keys in different batches
    are both written.
    """

    def __init__(self, size: int = BATCH_ITEMS) -> None:
        if size < 1:
            raise ValueError(f"batch size must be at least 1, got {size}")
        self.size = size
        self.duplicates = 0
        self._open: dict[tuple[Any, ...], Item] = {}

    def add(self, item: Item) -> list[Item] | None:
        """Add an item; returns a full batch when it completes one, else None."""
        batch = self._open
        if item.key in batch:
            self.duplicates += 1
        batch[item.key] = item
        if len(batch) < self.size:
            return None
        self._open = {}
        return list(batch.values())

    def flush(self) -> list[Item]:
        """The open batch (maybe empty); the batcher starts a new one."""
        batch, self._open = self._open, {}
        return list(batch.values())

    def __len__(self) -> int:
        return len(self._open)
