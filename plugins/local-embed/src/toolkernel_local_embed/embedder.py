"""``local/<model>``: an :class:`~toolkernel.embedders.Embedder` running an offline model in threads."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import anyio
import anyio.to_thread
import structlog

from toolkernel.embedders import caller_shows_progress
from toolkernel_local_embed.models import DEFAULT_MODEL, MODELS, Encoder, ModelSpec, load_encoder
from toolkernel_local_embed.options import LocalOptions

log = structlog.get_logger("toolkernel_local_embed")

ProgressCallback = Callable[[int, int], None]
"""``callback(done, total)``: texts embedded so far in this call, and texts in the call."""


class LocalEmbedder:
    """Embeds with a model loaded from an installed package, one batch at a time in a worker thread."""

    def __init__(
        self, spec: ModelSpec, options: LocalOptions, progress: ProgressCallback | None = None
    ) -> None:
        spec.check_installed()
        self._spec = spec
        self._options = options
        self._progress = progress
        self._encoder: Encoder | None = None
        self._lock = anyio.Lock()

    @property
    def name(self) -> str:
        """``local/<model>``."""
        return f"local/{self._spec.name}"

    @property
    def dimension(self) -> int:
        """Length of every vector (fixed per model, known before the model loads)."""
        return self._spec.dimension

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One unit-length vector per text, in order; the model runs off the event loop, batch by batch."""
        texts = list(texts)
        if not texts:
            return []
        encoder = await self._loaded()
        # Texts of similar length share a batch, so little time goes into padding; order is restored below.
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        batches = self._batches(order, texts)
        total_batches = len(batches)
        started = time.perf_counter()
        vectors: list[list[float]] = [[] for _ in texts]
        done = 0
        quiet = caller_shows_progress()
        for number, indices in enumerate(batches, start=1):
            array = await anyio.to_thread.run_sync(encoder.encode, [texts[i] for i in indices])
            for i, vector in zip(indices, array.tolist(), strict=True):
                vectors[i] = vector
            done += len(indices)
            if self._progress is not None:
                self._progress(done, len(texts))
            every = 0 if quiet else self._options.log_every
            if every and total_batches >= every and (number % every == 0 or number == total_batches):
                elapsed = time.perf_counter() - started
                log.info(
                    "embedding progress",
                    embedder=self.name,
                    done=done,
                    total=len(texts),
                    batch=number,
                    batches=total_batches,
                    texts_per_s=round(done / elapsed, 1) if elapsed else None,
                )
        return vectors

    def _batches(self, order: list[int], texts: list[str]) -> list[list[int]]:
        """``order`` (shortest text first) cut into model calls of at most ``batch_size`` texts and
        ``batch_tokens`` tokens, a call's texts each counted as long as its longest (padding)."""
        size, budget, cap = self._options.batch_size, self._options.batch_tokens, self._options.max_tokens
        batches: list[list[int]] = []
        current: list[int] = []
        for i in order:
            tokens = min(cap, -(-len(texts[i]) // 3))
            if current and (len(current) == size or (len(current) + 1) * tokens > budget):
                batches.append(current)
                current = []
            current.append(i)
        if current:
            batches.append(current)
        return batches

    async def _loaded(self) -> Encoder:
        """The model, loaded once in a worker thread the first time it is needed."""
        async with self._lock:
            if self._encoder is None:
                opts = self._options
                self._encoder = await anyio.to_thread.run_sync(
                    lambda: load_encoder(
                        self._spec, max_tokens=opts.max_tokens, threads=opts.threads, spin_wait=opts.spin_wait
                    )
                )
            return self._encoder


def local_embedder(
    model: str = DEFAULT_MODEL, *, progress: ProgressCallback | None = None, **options: Any
) -> LocalEmbedder:
    """Make ``local/<model>`` (a key of :data:`~toolkernel_local_embed.models.MODELS`) with options."""
    return local_embedder_from_options(model, LocalOptions(**options), progress)


def local_embedder_from_options(
    model: str, options: LocalOptions, progress: ProgressCallback | None = None
) -> LocalEmbedder:
    """Make ``local/<model>`` with validated options (what the kernel does with ``[plugins.local]``)."""
    try:
        spec = MODELS[model]
    except KeyError:
        known = ", ".join(f"local/{name}" for name in MODELS)
        raise LookupError(f"no local embedding model {model!r}; available: {known}") from None
    return LocalEmbedder(spec, options, progress)
