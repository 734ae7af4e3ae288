"""An :class:`~toolkernel.embedders.Embedder` for any OpenAI-compatible ``/embeddings`` endpoint."""

from __future__ import annotations

import email.utils
import os
import random
import time
from collections.abc import Sequence
from typing import Any

import anyio
import httpx
import structlog

from toolkernel_openai.options import OpenAIOptions

log = structlog.get_logger("toolkernel_openai")

DEFAULT_BASE_URL = "https://api.openai.com/v1"

KNOWN_DIMENSIONS = {
    "text-embedding-3-small": 1536,
    "text-embedding-3-large": 3072,
    "text-embedding-ada-002": 1536,
}
"""Vector lengths of OpenAI's own models, so they need no probe request."""


class OpenAIEmbedderError(RuntimeError):
    """An embedding request failed for good; the message names the embedder and the batch."""


class _Retryable(Exception):
    """A failure worth another attempt, with the server's requested wait if it gave one."""

    def __init__(self, reason: str, retry_after: float | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retry_after = retry_after


class OpenAIEmbedder:
    """Embeds through ``POST {base_url}/embeddings`` in batches, retrying transient failures."""

    def __init__(
        self, model: str, options: OpenAIOptions, *, client: httpx.AsyncClient | None = None
    ) -> None:
        self._model = model
        self._options = options
        base_url = options.base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL
        self._base_url = base_url.rstrip("/")
        self._api_key = options.api_key or os.environ.get("OPENAI_API_KEY")
        self._dimension = options.dimension or KNOWN_DIMENSIONS.get(model)
        self._client = client
        self._owns_client = client is None

    @property
    def name(self) -> str:
        """``openai/<model>``."""
        return f"openai/{self._model}"

    @property
    def dimension(self) -> int:
        """The vector length: given, known for OpenAI's models, or learnt from the first response."""
        if self._dimension is None:
            raise OpenAIEmbedderError(
                f"{self.name}: the vector length is not known yet; pass dimension=N, "
                "or `await embedder.probe()` (or embed once) before asking"
            )
        return self._dimension

    async def probe(self) -> int:
        """Learn the vector length with a one-word request (if not already known) and return it."""
        if self._dimension is None:
            await self.embed(["probe"])
        return self.dimension

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One vector per text, in order; batches run concurrently up to ``max_concurrency``."""
        texts = list(texts)
        size = self._options.max_batch_size
        batches = [texts[i : i + size] for i in range(0, len(texts), size)]
        results: list[list[list[float]]] = [[] for _ in batches]
        limiter = anyio.CapacityLimiter(self._options.max_concurrency)
        failures: list[OpenAIEmbedderError] = []

        async def run(number: int, scope: anyio.CancelScope) -> None:
            async with limiter:
                try:
                    results[number] = await self._embed_batch(number, len(batches), batches[number], size)
                except OpenAIEmbedderError as exc:
                    failures.append(exc)
                    scope.cancel()

        async with anyio.create_task_group() as tg:
            for number in range(len(batches)):
                tg.start_soon(run, number, tg.cancel_scope)
        if failures:
            raise failures[0]
        return [vector for batch in results for vector in batch]

    async def aclose(self) -> None:
        """Close the HTTP client if this embedder made it (an injected client stays open)."""
        if self._client is not None and self._owns_client:
            await self._client.aclose()
            self._client = None

    async def __aenter__(self) -> OpenAIEmbedder:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def _embed_batch(self, number: int, count: int, batch: list[str], size: int) -> list[list[float]]:
        """Send one batch, retrying transient failures with jittered exponential backoff."""
        first = number * size
        label = f"{self.name}: batch {number + 1}/{count} (texts {first}-{first + len(batch) - 1})"
        opts = self._options
        attempt = 0
        while True:
            try:
                return await self._request(label, batch)
            except _Retryable as failure:
                if attempt >= opts.max_retries:
                    raise OpenAIEmbedderError(
                        f"{label} failed after {attempt + 1} attempts: {failure.reason}"
                    ) from failure
                if failure.retry_after is not None and failure.retry_after > opts.max_retry_after:
                    raise OpenAIEmbedderError(
                        f"{label}: {failure.reason}; the server asked to wait {failure.retry_after:.0f} s, "
                        f"more than max_retry_after={opts.max_retry_after:.0f} s"
                    ) from failure
                ceiling = min(opts.backoff_max, opts.backoff_initial * 2**attempt)
                delay = random.uniform(0, ceiling)
                if failure.retry_after is not None:
                    delay = max(delay, failure.retry_after)
                attempt += 1
                log.warning(
                    "embedding request failed, retrying",
                    embedder=self.name,
                    batch=number + 1,
                    reason=failure.reason,
                    attempt=attempt,
                    delay_s=round(delay, 3),
                )
                await anyio.sleep(delay)

    async def _request(self, label: str, batch: list[str]) -> list[list[float]]:
        """One HTTP request for one batch: vectors in input order, or an error saying what went wrong."""
        if self._client is None:
            self._client = httpx.AsyncClient()
        body: dict[str, Any] = {"model": self._model, "input": batch, "encoding_format": "float"}
        if self._options.request_dimensions and self._options.dimension is not None:
            body["dimensions"] = self._options.dimension
        headers = {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}
        try:
            response = await self._client.post(
                f"{self._base_url}/embeddings",
                json=body,
                headers=headers,
                timeout=self._options.timeout,
            )
        except httpx.TimeoutException as exc:
            raise _Retryable(f"timed out after {self._options.timeout:g} s ({type(exc).__name__})") from exc
        except httpx.TransportError as exc:
            raise _Retryable(f"network error: {type(exc).__name__}: {exc}") from exc
        if response.status_code == 429 or response.status_code >= 500:
            raise _Retryable(
                f"HTTP {response.status_code}: {_error_text(response)}", _retry_after(response.headers)
            )
        if response.status_code != 200:
            raise OpenAIEmbedderError(f"{label}: HTTP {response.status_code}: {_error_text(response)}")
        return self._vectors(label, batch, response)

    def _vectors(self, label: str, batch: list[str], response: httpx.Response) -> list[list[float]]:
        """Check a 200 response and put its vectors in input order by their ``index``."""
        try:
            data = response.json()["data"]
            ordered = sorted(data, key=lambda item: item["index"])
            vectors = [[float(x) for x in item["embedding"]] for item in ordered]
        except (ValueError, KeyError, TypeError) as exc:
            raise OpenAIEmbedderError(f"{label}: response is not an embeddings list: {exc!r}") from exc
        if len(vectors) != len(batch):
            raise OpenAIEmbedderError(f"{label}: sent {len(batch)} texts, got {len(vectors)} vectors")
        lengths = {len(v) for v in vectors}
        if self._dimension is None and len(lengths) == 1:
            self._dimension = lengths.pop()
        if lengths and lengths != {self._dimension}:
            raise OpenAIEmbedderError(
                f"{label}: got vectors of length {sorted(lengths)}, expected {self._dimension}"
            )
        return vectors


def _error_text(response: httpx.Response) -> str:
    """The API's error message if it sent one in OpenAI's shape, else the start of the body."""
    try:
        payload = response.json()
        message = payload["error"]["message"] if isinstance(payload.get("error"), dict) else payload["error"]
        return str(message)
    except (ValueError, KeyError, TypeError, AttributeError):
        return response.text[:300] or response.reason_phrase


def _retry_after(headers: httpx.Headers) -> float | None:
    """Seconds the server asked us to wait: ``retry-after-ms``, or ``Retry-After`` as seconds or a date."""
    if (millis := headers.get("retry-after-ms")) is not None:
        try:
            return max(0.0, float(millis) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def openai_embedder(model: str, *, client: httpx.AsyncClient | None = None, **options: Any) -> OpenAIEmbedder:
    """Make ``openai/<model>`` from keyword options (see :class:`OpenAIOptions`); ``client`` is injectable."""
    return OpenAIEmbedder(model, OpenAIOptions(**options), client=client)
