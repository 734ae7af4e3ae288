"""Options of ``local/<model>``: the ``[plugins.local]`` settings; imports no model runtime."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["LocalOptions"]


class LocalOptions(BaseModel):
    """Options of ``local/<model>``, validated when the embedder is made so typos fail early."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    batch_size: int = Field(default=32, gt=0, description="Texts per model call (and per worker-thread hop).")
    batch_tokens: int = Field(
        default=2048,
        gt=0,
        description=(
            "The most tokens one model call holds (estimated at 3 characters a token, a text counted "
            "at most max_tokens): MiniLM's activations grow with them. 32 texts of 256 tokens peaked "
            "at 1.4 GB; 2048 tokens (8 such texts) at 0.55 GB, no slower."
        ),
    )
    max_tokens: int = Field(
        default=256, gt=0, le=512, description="MiniLM: tokens kept per text; the rest is cut."
    )
    threads: int | None = Field(default=None, gt=0, description="MiniLM: onnxruntime threads; None = cores.")
    spin_wait: bool = Field(
        default=True,
        description=(
            "MiniLM: onnxruntime's threads busy-wait for the next operator: a little faster on "
            "batches, CPU burnt for nothing on one short text."
        ),
    )
    log_every: int = Field(default=20, ge=0, description="Log progress every N batches; 0 = never.")
