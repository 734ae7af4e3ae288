"""Options of ``openai/<model>``: the ``[plugins.openai]`` settings; imports neither httpx nor anyio."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["OpenAIOptions"]


class OpenAIOptions(BaseModel):
    """Options of ``openai/<model>``, validated when the embedder is made so typos fail early."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    base_url: str | None = Field(
        default=None, description="API root ending in /v1; default $OPENAI_BASE_URL, else OpenAI's."
    )
    api_key: str | None = Field(
        default=None, description="Bearer token; default $OPENAI_API_KEY; none sends no header."
    )
    dimension: int | None = Field(default=None, gt=0, description="Vector length, if known in advance.")
    request_dimensions: bool = Field(
        default=False, description="Also send `dimension` as the API's `dimensions` (shortened vectors)."
    )
    max_batch_size: int = Field(default=128, gt=0, description="Most texts sent in one request.")
    max_concurrency: int = Field(default=4, gt=0, description="Most requests in flight at once.")
    timeout: float = Field(default=30.0, gt=0, description="Seconds allowed for each request.")
    max_retries: int = Field(default=5, ge=0, description="Retries after a 5xx, 429, timeout or I/O error.")
    backoff_initial: float = Field(default=0.5, gt=0, description="Seconds: the first backoff ceiling.")
    backoff_max: float = Field(default=30.0, gt=0, description="Seconds: the largest backoff ceiling.")
    max_retry_after: float = Field(
        default=120.0, gt=0, description="Seconds: the longest Retry-After the embedder will wait out."
    )
