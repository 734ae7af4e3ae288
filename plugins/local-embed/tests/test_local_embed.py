"""Tests of ``local/<model>`` with the real models on small inputs."""

from __future__ import annotations

import importlib.util
import pathlib
from collections.abc import Callable

import numpy as np
import pytest
import structlog

from toolkernel import Kernel
from toolkernel.embedders import Embedder
from toolkernel_local_embed import plugin
from toolkernel_local_embed.embedder import LocalEmbedder, local_embedder
from toolkernel_local_embed.models import MODELS, MissingExtraError

SENTENCES = [
    "A man is eating food.",
    "A man is eating a piece of bread.",
    "The new movie is awesome.",
    "The stock market fell sharply on Monday.",
    "Two dogs are playing in the snow.",
]


@pytest.fixture(scope="module", params=sorted(MODELS))
def embedder(request: pytest.FixtureRequest) -> LocalEmbedder:
    """Each model once per module (loading is the slow part), batching two texts per model call."""
    return local_embedder(request.param, batch_size=2)


@pytest.mark.anyio
async def test_vectors_have_the_dimension_and_unit_length(embedder: LocalEmbedder) -> None:
    vectors = np.array(await embedder.embed(SENTENCES))
    assert vectors.shape == (len(SENTENCES), embedder.dimension)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


@pytest.mark.anyio
async def test_embedding_is_deterministic(embedder: LocalEmbedder) -> None:
    assert await embedder.embed(SENTENCES) == await embedder.embed(SENTENCES)


@pytest.mark.anyio
async def test_batching_neither_reorders_nor_changes_vectors(embedder: LocalEmbedder) -> None:
    batched = np.array(await embedder.embed(SENTENCES))
    alone = np.array([(await embedder.embed([text]))[0] for text in SENTENCES])
    # Padding to the longest text in a batch must be masked out of the mean.
    np.testing.assert_allclose(batched, alone, atol=1e-5)


@pytest.mark.anyio
async def test_a_paraphrase_is_nearer_than_an_unrelated_sentence(embedder: LocalEmbedder) -> None:
    food, bread, _, stocks, _ = np.array(await embedder.embed(SENTENCES))
    assert food @ bread > 0.6
    assert food @ bread > food @ stocks + 0.4


@pytest.mark.anyio
async def test_threads_that_sleep_between_operators_embed_the_same_vectors() -> None:
    default = np.array(await local_embedder("minilm-l6-int8").embed(SENTENCES))
    sleeper = local_embedder("minilm-l6-int8", threads=2, spin_wait=False)
    sleeping = np.array(await sleeper.embed(SENTENCES))
    np.testing.assert_allclose(sleeping, default, atol=1e-5)
    options = sleeper._encoder._session.get_session_options()  # type: ignore[union-attr]
    assert options.get_session_config_entry("session.intra_op.allow_spinning") == "0"
    assert options.intra_op_num_threads == 2
    with pytest.raises(ValueError, match="spin_wait"):
        local_embedder("minilm-l6-int8", spin_wait="sometimes")


@pytest.mark.anyio
async def test_empty_input_makes_no_vectors(embedder: LocalEmbedder) -> None:
    assert await embedder.embed([]) == []


@pytest.mark.anyio
async def test_progress_is_reported_by_callback_and_log() -> None:
    seen: list[tuple[int, int]] = []
    embedder = local_embedder(
        "wordllama-256", batch_size=2, log_every=2, progress=lambda done, total: seen.append((done, total))
    )
    with structlog.testing.capture_logs() as logs:
        await embedder.embed(SENTENCES)
    assert seen == [(2, 5), (4, 5), (5, 5)]
    lines = [(e["batch"], e["done"]) for e in logs if e["event"] == "embedding progress"]
    assert lines == [(2, 4), (3, 5)]


def test_a_missing_extra_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "onnxruntime" else real_find_spec(name, *a),
    )
    with pytest.raises(MissingExtraError) as caught:
        local_embedder("minilm-l6-int8")
    assert str(caught.value) == (
        "local/minilm-l6-int8 needs onnxruntime: pip install 'toolkernel-local-embed[minilm]'"
    )


def test_unknown_models_and_options_are_named() -> None:
    with pytest.raises(LookupError, match="available: local/minilm-l6-int8, local/wordllama-256"):
        local_embedder("bert-huge")
    with pytest.raises(ValueError, match="batchsize"):
        local_embedder("wordllama-256", batchsize=8)


def test_the_kernel_builds_local_embedders_by_name(kernel_with: Callable[..., Kernel]) -> None:
    embedder = kernel_with(plugin).embedder("local/minilm-l6-int8", batch_size=8)
    assert isinstance(embedder, Embedder)
    assert (embedder.name, embedder.dimension) == ("local/minilm-l6-int8", 384)


def test_the_kernel_builds_the_embedder_from_its_settings(tmp_path: pathlib.Path) -> None:
    from toolkernel import ConfigError

    config = tmp_path / "toolkernel.toml"
    config.write_text("[plugins.local]\nbatch_size = 4\nlog_every = 0\n")
    kernel = Kernel.from_config(config, load_entry_points=False, plugins=[plugin])
    embedder = kernel.embedder("local/minilm-l6-int8", log_every=5)  # call options win over the table
    assert (embedder._options.batch_size, embedder._options.log_every) == (4, 5)
    with pytest.raises(ConfigError, match=r"\[plugins\.local\] batch_size in Kernel\(settings=...\)"):
        Kernel(load_entry_points=False, plugins=[plugin], settings={"local": {"batch_size": 0}}).check()
