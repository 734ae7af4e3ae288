"""Task bodies on a Redis stream, run by every replica's worker through one consumer group.

``put`` appends a job (``XADD``). Each replica's worker reads new jobs with ``XREADGROUP``
in the group ``workers`` under its own consumer name, renews its claim on the jobs it runs
every second (``XCLAIM ... JUSTID`` resets their idle time), and takes over jobs whose
worker stopped renewing for :data:`ORPHANED_AFTER_MS` (``XAUTOCLAIM``): the jobs of a
replica that died. ``done`` acknowledges and deletes the entry; ``release`` stops renewing it, so it is taken
again like an orphan. Delivery is at least once.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from redis.exceptions import ResponseError

from toolkernel.shared_state import StoreUnavailable
from toolkernel_redis._client import PREFIX, text

if TYPE_CHECKING:
    from toolkernel_redis._state import RedisSharedState

logger = logging.getLogger("toolkernel.redis")

QUEUE = f"{PREFIX}task-queue"
GROUP = "workers"
RENEW_S = 1.0
"""How often a worker renews its claim on the jobs it runs."""
ORPHANED_AFTER_MS = 5000
"""A job whose worker has not renewed its claim for this long is taken by another worker."""
READ_BLOCK_MS = 1000
"""How long one ``XREADGROUP`` waits for a new job (below ``STORE_TIMEOUT_S``, which bounds the call)."""


class RedisJob:
    """One job a worker holds: its data, and the stream entry to acknowledge when it is over."""

    def __init__(self, queue: RedisTaskQueue, entry: str, data: dict[str, Any]) -> None:
        self._queue = queue
        self.entry = entry
        self.data = data

    async def done(self) -> None:
        """Acknowledge and delete the entry: no worker runs it again."""
        self._queue.held.discard(self.entry)
        state = self._queue.state
        await state.guard(state.client.xack(QUEUE, GROUP, self.entry))
        await state.guard(state.client.xdel(QUEUE, self.entry))

    async def release(self) -> None:
        """Stop renewing the claim: after :data:`ORPHANED_AFTER_MS` any worker takes the job again."""
        self._queue.held.discard(self.entry)


class RedisTaskQueue:
    """The ``TaskQueue`` contract on a Redis stream (see the module doc)."""

    def __init__(self, state: RedisSharedState) -> None:
        self.state = state
        self.held: set[str] = set()
        """Entries this replica's worker runs now (their claims are renewed)."""

    async def put(self, data: dict[str, Any]) -> None:
        """Append a job for any replica's worker."""
        await self.state.guard(self.state.client.xadd(QUEUE, {"job": json.dumps(data)}))

    async def take(self) -> AsyncIterator[RedisJob]:
        """Jobs for this replica's worker: orphaned ones first, then new ones, until cancelled."""
        consumer = self.state.replica
        renewer = asyncio.get_running_loop().create_task(self._renew(consumer))
        try:
            ready = False
            while True:
                try:
                    if not ready:
                        await self._create_group()
                        ready = True
                    for job in await self._orphans(consumer):
                        yield job
                    for job in await self._new(consumer):
                        yield job
                except StoreUnavailable as exc:
                    logger.warning("task worker waits for the store: %s", exc)
                    ready = False
                    await asyncio.sleep(0.5)
        finally:
            renewer.cancel()

    async def _create_group(self) -> None:
        try:
            await self.state.guard(self.state.client.xgroup_create(QUEUE, GROUP, id="0", mkstream=True))
        except ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise

    async def _orphans(self, consumer: str) -> list[RedisJob]:
        reply: Any = await self.state.guard(
            self.state.client.xautoclaim(QUEUE, GROUP, consumer, ORPHANED_AFTER_MS, "0-0", count=10)
        )
        return self._jobs(reply[1])

    async def _new(self, consumer: str) -> list[RedisJob]:
        reply: Any = await self.state.guard(
            self.state.client.xreadgroup(GROUP, consumer, {QUEUE: ">"}, count=10, block=READ_BLOCK_MS)
        )
        return self._jobs(reply[0][1]) if reply else []

    def _jobs(self, entries: list[Any]) -> list[RedisJob]:
        jobs = []
        for entry_id, fields in entries:
            if not fields:  # deleted while pending
                continue
            entry = text(entry_id)
            self.held.add(entry)
            jobs.append(RedisJob(self, entry, json.loads(fields[b"job"])))
        return jobs

    async def _renew(self, consumer: str) -> None:
        while True:
            await asyncio.sleep(RENEW_S)
            if not self.held:
                continue
            try:
                await self.state.guard(
                    self.state.client.xclaim(QUEUE, GROUP, consumer, 0, list(self.held), justid=True)
                )
            except StoreUnavailable as exc:
                logger.warning("task worker cannot renew its jobs: %s", exc)
