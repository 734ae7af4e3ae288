"""``cross-encoder``: scores (query, passage) pairs with an ONNX cross-encoder on onnxruntime.

A cross-encoder reads the query and the passage together and outputs one relevance logit, which
beats comparing two separately made vectors. The model is an ONNX export plus its
``tokenizer.json`` (ms-marco-MiniLM-L-6-v2, bge-reranker-base/-large, ...), found at a path or in
the user's model cache; nothing is downloaded. numpy, onnxruntime and tokenizers load with the model.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import anyio
import anyio.to_thread
from pydantic import BaseModel, ConfigDict, Field

from toolkernel_rag.rerankers.candidates import RerankError, check_passages

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

DEFAULT_MODEL = "cross-encoder/ms-marco-MiniLM-L-6-v2"
MODEL_INPUTS = ("input_ids", "attention_mask", "token_type_ids")
"""The inputs BERT-style exports take; a model that lacks one (XLM-R: no token types) is fed the rest."""


class CrossEncoderOptions(BaseModel):
    """Options of the ``cross-encoder`` reranker, validated when it is made so typos fail early."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str = Field(
        default=DEFAULT_MODEL,
        description="A directory or .onnx file, or a model name looked up in the model caches.",
    )
    onnx_file: str | None = Field(
        default=None, description="Which .onnx file inside the model directory (e.g. onnx/model_quint8.onnx)."
    )
    max_tokens: int = Field(default=512, gt=2, le=8192, description="Query + passage tokens kept per pair.")
    batch_size: int = Field(default=16, gt=0, description="Pairs per model call.")
    activation: Literal["sigmoid", "none"] = Field(
        default="sigmoid", description="sigmoid maps logits into 0..1; none returns raw logits."
    )
    threads: int | None = Field(default=None, gt=0, description="onnxruntime intra-op threads; None = cores.")


def cache_dirs() -> list[Path]:
    """Where model names are looked up: ``$TOOLKERNEL_MODELS``, toolkernel's cache, Hugging Face's."""
    home_cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    dirs = []
    if env := os.environ.get("TOOLKERNEL_MODELS"):
        dirs.append(Path(env))
    dirs.append(home_cache / "toolkernel" / "models")
    hf_home = os.environ.get("HF_HOME")
    dirs.append(
        Path(
            os.environ.get("HF_HUB_CACHE")
            or (Path(hf_home) / "hub" if hf_home else home_cache / "huggingface" / "hub")
        )
    )
    return dirs


def _candidates_for(name: str) -> list[Path]:
    """Directories a model name may live in: ``<cache>/<org>/<name>`` or a Hugging Face snapshot."""
    found: list[Path] = []
    for root in cache_dirs():
        found.append(root / name)
        snapshots = root / f"models--{name.replace('/', '--')}" / "snapshots"
        if snapshots.is_dir():
            found.extend(sorted(snapshots.iterdir(), key=lambda p: p.stat().st_mtime, reverse=True))
    return found


def locate(model: str, onnx_file: str | None = None) -> tuple[Path, Path]:
    """The ``(model.onnx, tokenizer.json)`` paths of ``model``; the error lists every place searched."""
    given = Path(model).expanduser()
    if given.is_file():
        directories, onnx_file = [given.parent], given.name
    elif given.is_dir():
        directories = [given]
    elif given.is_absolute() or model.startswith((".", "~")):
        raise RerankError(f"cross-encoder: model path {model} does not exist")
    else:
        directories = [d for d in _candidates_for(model) if d.is_dir()]
        if not directories:
            places = ", ".join(str(p) for p in cache_dirs())
            raise RerankError(
                f"cross-encoder: model {model!r} is not in a model cache (looked under {places}); "
                "put its ONNX export and tokenizer.json in one of them or pass model=PATH"
            )
    for directory in directories:
        onnx = _onnx_in(directory, onnx_file)
        tokenizer = next(
            (d / "tokenizer.json" for d in (directory, directory.parent) if (d / "tokenizer.json").is_file()),
            None,
        )
        if onnx is not None and tokenizer is not None:
            return onnx, tokenizer
    wanted = onnx_file or "model.onnx or onnx/model.onnx"
    raise RerankError(
        f"cross-encoder: no {wanted} with a tokenizer.json beside it in {', '.join(map(str, directories))}"
    )


def _onnx_in(directory: Path, onnx_file: str | None) -> Path | None:
    """The ONNX file in ``directory``: the one asked for, else model.onnx, onnx/model.onnx or the only one."""
    if onnx_file is not None:
        path = directory / onnx_file
        return path if path.is_file() else None
    for name in ("model.onnx", "onnx/model.onnx"):
        if (directory / name).is_file():
            return directory / name
    found = sorted(directory.glob("*.onnx")) or sorted(directory.glob("onnx/*.onnx"))
    return found[0] if len(found) == 1 else None


class _LoadedModel:
    """An onnxruntime session and its tokenizer, set up for (query, passage) pairs."""

    def __init__(self, onnx: Path, tokenizer_file: Path, options: CrossEncoderOptions) -> None:
        try:
            import numpy as np
            import onnxruntime  # type: ignore[import-untyped]
            from tokenizers import Tokenizer
        except ImportError as exc:
            raise RerankError(
                f"cross-encoder needs numpy, onnxruntime and tokenizers: pip install 'toolkernel-rag' ({exc})"
            ) from exc
        self._np = np
        self._activation = options.activation
        try:
            self._tokenizer = Tokenizer.from_file(str(tokenizer_file))
        except Exception as exc:
            raise RerankError(f"cross-encoder: cannot read tokenizer {tokenizer_file}: {exc}") from exc
        # Exports ship their own truncation and padding (often 128 tokens, fixed length): replace both.
        self._tokenizer.enable_truncation(max_length=options.max_tokens, strategy="longest_first")
        padding = self._tokenizer.padding or {}
        pad_token = padding.get("pad_token") or next(
            (t for t in ("[PAD]", "<pad>") if self._tokenizer.token_to_id(t) is not None), "[PAD]"
        )
        pad_id = self._tokenizer.token_to_id(pad_token) or 0
        self._tokenizer.enable_padding(pad_id=pad_id, pad_token=pad_token)
        session_options = onnxruntime.SessionOptions()
        if options.threads:
            session_options.intra_op_num_threads = options.threads
        try:
            self._session = onnxruntime.InferenceSession(
                str(onnx), session_options, providers=["CPUExecutionProvider"]
            )
        except Exception as exc:
            raise RerankError(f"cross-encoder: onnxruntime cannot load {onnx}: {exc}") from exc
        self._inputs = [i.name for i in self._session.get_inputs()]
        unknown = [name for name in self._inputs if name not in MODEL_INPUTS]
        if unknown or "input_ids" not in self._inputs:
            raise RerankError(
                f"cross-encoder: {onnx} takes inputs {self._inputs}; expected input_ids and optionally "
                f"{', '.join(MODEL_INPUTS[1:])}"
            )
        self._output = self._session.get_outputs()[0].name

    def score(self, query: str, passages: list[str]) -> list[float]:
        """Relevance of each passage to ``query`` in one model call (blocking)."""
        np = self._np
        encodings = self._tokenizer.encode_batch([(query, passage) for passage in passages])
        arrays = {
            "input_ids": np.array([e.ids for e in encodings], dtype=np.int64),
            "attention_mask": np.array([e.attention_mask for e in encodings], dtype=np.int64),
            "token_type_ids": np.array([e.type_ids for e in encodings], dtype=np.int64),
        }
        (logits,) = self._session.run([self._output], {name: arrays[name] for name in self._inputs})
        return self._relevance(np.asarray(logits, dtype=np.float32), len(passages))

    def _relevance(self, logits: npt.NDArray[np.float32], count: int) -> list[float]:
        """One number per pair from logits shaped ``(batch,)``, ``(batch, 1)`` or ``(batch, 2)`` (last)."""
        np = self._np
        if logits.ndim == 2 and logits.shape[1] in (1, 2):
            logits = logits[:, -1]
        if logits.shape != (count,):
            raise RerankError(
                f"cross-encoder: model output {self._output} has shape {logits.shape}, expected ({count}, 1)"
            )
        if self._activation == "sigmoid":
            logits = 1.0 / (1.0 + np.exp(-logits))
        return [float(x) for x in logits]


class CrossEncoderReranker:
    """Scores passages with an ONNX cross-encoder, batch by batch in a worker thread; loads on first use."""

    def __init__(self, options: CrossEncoderOptions) -> None:
        self._options = options
        self._model: _LoadedModel | None = None
        self._lock = anyio.Lock()

    @property
    def name(self) -> str:
        """``cross-encoder:<model>``."""
        return f"cross-encoder:{self._options.model}"

    def check(self) -> None:
        """Raise :class:`RerankError` when the model files cannot be found (cheap: no model is loaded)."""
        locate(self._options.model, self._options.onnx_file)

    async def load(self) -> None:
        """Find and load the model now (otherwise the first ``score`` does); errors name what is missing."""
        await self._loaded()

    async def score(self, query: str, passages: Sequence[str]) -> list[float]:
        """One relevance score per passage, in order (0..1 with the default sigmoid)."""
        texts = check_passages(self.name, query, passages)
        if not texts:
            return []
        model = await self._loaded()
        # Similar lengths share a batch, so little compute goes into padding; order is restored below.
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        scores = [0.0] * len(texts)
        size = self._options.batch_size
        for first in range(0, len(order), size):
            indices = order[first : first + size]
            batch = await anyio.to_thread.run_sync(model.score, query, [texts[i] for i in indices])
            for i, value in zip(indices, batch, strict=True):
                scores[i] = value
        return scores

    async def _loaded(self) -> _LoadedModel:
        async with self._lock:
            if self._model is None:
                onnx, tokenizer = locate(self._options.model, self._options.onnx_file)
                self._model = await anyio.to_thread.run_sync(_LoadedModel, onnx, tokenizer, self._options)
            return self._model


def cross_encoder_reranker(**options: Any) -> CrossEncoderReranker:
    """Make the ``cross-encoder`` reranker from keyword options (see :class:`CrossEncoderOptions`)."""
    return CrossEncoderReranker(CrossEncoderOptions(**options))
