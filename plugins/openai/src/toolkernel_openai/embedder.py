"""An :class:`~toolkernel.embedders.Embedder` for any OpenAI-compatible ``/embeddings`` endpoint."""

from __future__ import annotations

import functools
import os
from collections.abc import Sequence
from typing import Any

import httpx
import structlog

from toolkernel.remote_batches import Retryable, map_batches, retry_after, with_retries
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
        opts = self._options
        return await map_batches(
            list(texts), opts.max_batch_size, opts.max_concurrency, self._embed_batch, OpenAIEmbedderError
        )

    async def aclose(self) -> None:
        """Close the HTTP client if this embedder made it (an injected client stays open)."""
        if self._client is not None and self._owns_client:
            await self._client.aclose()
            self._client = None

    async def __aenter__(self) -> OpenAIEmbedder:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def _embed_batch(self, number: int, count: int, batch: list[str]) -> list[list[float]]:
        """Send one batch, retrying transient failures with jittered exponential backoff."""
        first = number * self._options.max_batch_size
        label = f"{self.name}: batch {number + 1}/{count} (texts {first}-{first + len(batch) - 1})"

        def logged(failure: Retryable, attempt: int, delay: float) -> None:
            log.warning(
                "embedding request failed, retrying",
                embedder=self.name,
                batch=number + 1,
                reason=failure.reason,
                attempt=attempt,
                delay_s=round(delay, 3),
            )

        request = functools.partial(self._request, label, batch)
        return await with_retries(request, self._options, label, OpenAIEmbedderError, logged)

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
            raise Retryable(f"timed out after {self._options.timeout:g} s ({type(exc).__name__})") from exc
        except httpx.TransportError as exc:
            raise Retryable(f"network error: {type(exc).__name__}: {exc}") from exc
        if response.status_code == 429 or response.status_code >= 500:
            raise Retryable(
                f"HTTP {response.status_code}: {_error_text(response)}", retry_after(response.headers)
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


def openai_embedder(model: str, *, client: httpx.AsyncClient | None = None, **options: Any) -> OpenAIEmbedder:
    """Make ``openai/<model>`` from keyword options (see :class:`OpenAIOptions`); ``client`` is injectable."""
    return OpenAIEmbedder(model, OpenAIOptions(**options), client=client)
