"""``http``: a reranker for Cohere/Jina-compatible ``POST {base_url}/rerank`` APIs.

The request is ``{"model", "query", "documents": [...], "top_n", "return_documents": false}`` and
the answer ``{"results": [{"index", "relevance_score"}, ...]}``, the shape Cohere (v1 and v2), Jina
and self-hosted servers such as Infinity and vLLM share. Passages go in batches
of ``max_batch_size``; transient failures (429, 5xx, timeouts, network errors) are retried with
jittered exponential backoff that honours ``Retry-After``.
"""

from __future__ import annotations

import functools
import math
import os
from collections.abc import Sequence
from typing import Any

import httpx
from pydantic import BaseModel, ConfigDict, Field

from toolkernel.remote_batches import Retryable, map_batches, retry_after, with_retries
from toolkernel_rag.rerankers.candidates import RerankError, check_passages

API_KEY_ENV = "RERANK_API_KEY"
BASE_URL_ENV = "RERANK_BASE_URL"


class HttpRerankOptions(BaseModel):
    """Options of the ``http`` reranker, validated when it is made so typos fail early."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str = Field(min_length=1, description="The model name the API expects, e.g. rerank-v3.5.")
    base_url: str | None = Field(
        default=None, description="API root the path /rerank is appended to; default $RERANK_BASE_URL."
    )
    api_key: str | None = Field(
        default=None, description="Bearer token; default $RERANK_API_KEY; none sends none."
    )
    max_batch_size: int = Field(default=100, gt=0, description="Most passages sent in one request.")
    max_concurrency: int = Field(default=4, gt=0, description="Most requests in flight at once.")
    timeout: float = Field(default=30.0, gt=0, description="Seconds allowed for each request.")
    max_retries: int = Field(default=3, ge=0, description="Retries after a 5xx, 429, timeout or I/O error.")
    backoff_initial: float = Field(default=0.5, gt=0, description="Seconds: the first backoff ceiling.")
    backoff_max: float = Field(default=10.0, gt=0, description="Seconds: the largest backoff ceiling.")
    max_retry_after: float = Field(
        default=60.0, gt=0, description="Seconds: the longest Retry-After waited out."
    )


class HttpReranker:
    """Scores passages through a hosted or self-hosted ``/rerank`` endpoint."""

    def __init__(self, options: HttpRerankOptions, *, client: httpx.AsyncClient | None = None) -> None:
        base_url = options.base_url or os.environ.get(BASE_URL_ENV)
        if not base_url:
            raise RerankError(
                f"http reranker: no base_url and ${BASE_URL_ENV} is unset; pass e.g. "
                "base_url='https://api.cohere.com/v1' or 'https://api.jina.ai/v1'"
            )
        if not base_url.startswith(("http://", "https://")):
            raise RerankError(f"http reranker: base_url {base_url!r} must start with http:// or https://")
        self._url = base_url.rstrip("/") + "/rerank"
        self._api_key = options.api_key or os.environ.get(API_KEY_ENV)
        self._options = options
        self._client = client
        self._owns_client = client is None

    @property
    def name(self) -> str:
        """``http:<model>``."""
        return f"http:{self._options.model}"

    async def score(self, query: str, passages: Sequence[str]) -> list[float]:
        """One relevance score per passage, in order; batches run concurrently up to ``max_concurrency``."""
        texts = check_passages(self.name, query, passages)
        opts = self._options

        async def batch(number: int, count: int, part: list[str]) -> list[float]:
            return await self._batch(query, part, f"batch {number + 1}/{count}")

        return await map_batches(texts, opts.max_batch_size, opts.max_concurrency, batch, RerankError)

    async def aclose(self) -> None:
        """Close the HTTP client if this reranker made it (an injected client stays open)."""
        if self._client is not None and self._owns_client:
            await self._client.aclose()
            self._client = None

    async def __aenter__(self) -> HttpReranker:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def _batch(self, query: str, batch: list[str], where: str) -> list[float]:
        """Send one batch, retrying transient failures with jittered exponential backoff."""
        label = f"{self.name}: {where} ({len(batch)} passages) to {self._url}"
        request = functools.partial(self._request, label, query, batch)
        return await with_retries(request, self._options, label, RerankError)

    async def _request(self, label: str, query: str, batch: list[str]) -> list[float]:
        """One HTTP request: the scores in passage order, or an error saying what went wrong."""
        if self._client is None:
            self._client = httpx.AsyncClient()
        body: dict[str, Any] = {
            "model": self._options.model,
            "query": query,
            "documents": batch,
            "top_n": len(batch),
            "return_documents": False,
        }
        headers = {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}
        try:
            response = await self._client.post(
                self._url, json=body, headers=headers, timeout=self._options.timeout
            )
        except httpx.TimeoutException as exc:
            raise Retryable(f"timed out after {self._options.timeout:g} s ({type(exc).__name__})") from exc
        except httpx.TransportError as exc:
            raise Retryable(f"network error: {type(exc).__name__}: {exc}") from exc
        if response.status_code == 429 or response.status_code >= 500:
            reason = f"HTTP {response.status_code}: {_error_text(response)}"
            raise Retryable(reason, retry_after(response.headers))
        if response.status_code != 200:
            raise RerankError(f"{label}: HTTP {response.status_code}: {_error_text(response)}")
        return _scores(label, response, len(batch))


def _scores(label: str, response: httpx.Response, count: int) -> list[float]:
    """Check a 200 answer and put its scores in passage order by their ``index``."""
    try:
        results = response.json()["results"]
        pairs = [(int(item["index"]), float(item["relevance_score"])) for item in results]
    except (ValueError, KeyError, TypeError) as exc:
        raise RerankError(f"{label}: answer is not a rerank result list: {exc!r}") from exc
    scores: list[float | None] = [None] * count
    for index, value in pairs:
        if not 0 <= index < count:
            raise RerankError(f"{label}: result index {index} is outside 0..{count - 1}")
        if scores[index] is not None:
            raise RerankError(f"{label}: result index {index} appears twice")
        if not math.isfinite(value):
            raise RerankError(f"{label}: result {index} has relevance_score {value!r}")
        scores[index] = value
    missing = [i for i, s in enumerate(scores) if s is None]
    if missing:
        raise RerankError(f"{label}: no score for passages {missing[:10]} of {count}")
    return [s for s in scores if s is not None]


def _error_text(response: httpx.Response) -> str:
    """The API's error message (``message``, ``detail`` or ``error``), else the start of the body."""
    try:
        payload = response.json()
        for key in ("message", "detail", "error"):
            if key in payload:
                value = payload[key]
                return str(value.get("message", value) if isinstance(value, dict) else value)
    except (ValueError, TypeError, AttributeError):
        pass
    return response.text[:300] or response.reason_phrase


def http_reranker(*, client: httpx.AsyncClient | None = None, **options: Any) -> HttpReranker:
    """Make the ``http`` reranker from options (:class:`HttpRerankOptions`); ``client`` is injectable."""
    return HttpReranker(HttpRerankOptions(**options), client=client)
