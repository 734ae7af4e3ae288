"""Tests of the ``cross-encoder`` reranker with tiny ONNX models the tests build themselves.

No package on a registry ships cross-encoder weights, so the models here are small graphs made
with onnx's helper API. They take the inputs and give the output that ms-marco-MiniLM exports do
(``input_ids``, ``attention_mask``, ``token_type_ids`` → ``logits`` of shape (batch, 1)) and
compute a real interaction between the two segments: how many (hashed) tokens the query segment
and the passage segment share. Everything else is the shipped code: finding the files, the real
MiniLM ``tokenizer.json`` (with its own 128-token truncation and padding, which must be
replaced), pair encoding, padding per batch, batching, onnxruntime and the activation.
"""

from __future__ import annotations

import importlib.resources
import math
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from pydantic import ValidationError
from tokenizers import Tokenizer

from toolkernel.rerankers import Reranker
from toolkernel_rag.rerankers import RerankError, rerank
from toolkernel_rag.rerankers import plugin as rerank_plugin
from toolkernel_rag.rerankers.candidates import Candidate
from toolkernel_rag.rerankers.cross_encoder import cross_encoder_reranker

BUCKETS = 251
"""Token ids are hashed into this many buckets (id mod BUCKETS) so the one-hot table stays small."""
SCALE, BIAS = 1.0, -2.0
TOKENIZER_JSON = (
    importlib.resources.files("toolkernel_local_embed") / "assets" / "minilm-l6-tokenizer.json"
).read_text(encoding="utf-8")


def overlap_graph(with_token_types: bool = True) -> onnx.ModelProto:
    """logits = SCALE · |bag(query tokens) ∩ bag(passage tokens)| + BIAS, per pair, shape (batch, 1).

    Without token types (XLM-R style inputs) it scores SCALE · (number of real tokens) + BIAS.
    """
    ints = [
        helper.make_tensor_value_info(n, TensorProto.INT64, ["batch", "seq"])
        for n in ("input_ids", "attention_mask")
    ]
    inits = [
        numpy_helper.from_array(np.eye(BUCKETS, dtype=np.float32), "eye"),
        numpy_helper.from_array(np.array(BUCKETS, dtype=np.int64), "buckets"),
        numpy_helper.from_array(np.array([1], dtype=np.int64), "axis1"),
        numpy_helper.from_array(np.array([2], dtype=np.int64), "axis2"),
        numpy_helper.from_array(np.array(SCALE, dtype=np.float32), "scale"),
        numpy_helper.from_array(np.array(BIAS, dtype=np.float32), "bias"),
    ]
    nodes = [helper.make_node("Cast", ["attention_mask"], ["mask"], to=TensorProto.FLOAT)]
    if with_token_types:
        ints.append(helper.make_tensor_value_info("token_type_ids", TensorProto.INT64, ["batch", "seq"]))
        nodes += [
            helper.make_node("Mod", ["input_ids", "buckets"], ["hashed"]),
            helper.make_node("Gather", ["eye", "hashed"], ["onehot"]),  # (batch, seq, BUCKETS)
            helper.make_node("Cast", ["token_type_ids"], ["types"], to=TensorProto.FLOAT),
            helper.make_node("Mul", ["mask", "types"], ["passage_w"]),
            helper.make_node("Sub", ["mask", "passage_w"], ["query_w"]),
            helper.make_node("Unsqueeze", ["passage_w", "axis2"], ["passage_w3"]),
            helper.make_node("Unsqueeze", ["query_w", "axis2"], ["query_w3"]),
            helper.make_node("Mul", ["onehot", "passage_w3"], ["passage_hot"]),
            helper.make_node("Mul", ["onehot", "query_w3"], ["query_hot"]),
            helper.make_node("ReduceSum", ["passage_hot", "axis1"], ["passage_bag"], keepdims=0),
            helper.make_node("ReduceSum", ["query_hot", "axis1"], ["query_bag"], keepdims=0),
            helper.make_node("Min", ["query_bag", "passage_bag"], ["shared"]),
            helper.make_node("ReduceSum", ["shared", "axis1"], ["count"], keepdims=1),
        ]
    else:
        nodes.append(helper.make_node("ReduceSum", ["mask", "axis1"], ["count"], keepdims=1))
    nodes += [
        helper.make_node("Mul", ["count", "scale"], ["scaled"]),
        helper.make_node("Add", ["scaled", "bias"], ["logits"]),
    ]
    output = helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 1])
    graph = helper.make_graph(nodes, "tiny-cross-encoder", ints, [output], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    return model


def write_model(directory: Path, *, onnx_name: str = "model.onnx", with_token_types: bool = True) -> Path:
    """Save a tiny model and the real MiniLM tokenizer.json the way exports are laid out."""
    (directory / onnx_name).parent.mkdir(parents=True, exist_ok=True)
    onnx.save(overlap_graph(with_token_types), str(directory / onnx_name))
    (directory / "tokenizer.json").write_text(TOKENIZER_JSON, encoding="utf-8")
    return directory


def expected(query: str, passage: str, max_tokens: int = 512, sigmoid: bool = True) -> float:
    """What the tiny model must output for a pair, computed independently in plain Python."""
    tokenizer = Tokenizer.from_str(TOKENIZER_JSON)
    tokenizer.no_padding()
    tokenizer.enable_truncation(max_length=max_tokens, strategy="longest_first")
    encoding = tokenizer.encode(query, passage)
    query_bag = Counter(i % BUCKETS for i, t in zip(encoding.ids, encoding.type_ids, strict=True) if t == 0)
    passage_bag = Counter(i % BUCKETS for i, t in zip(encoding.ids, encoding.type_ids, strict=True) if t == 1)
    logit = SCALE * sum((query_bag & passage_bag).values()) + BIAS
    return 1 / (1 + math.exp(-logit)) if sigmoid else logit


QUERY = "red fox"
PASSAGES = [
    "bananas are yellow and sweet, grown in warm places all over the world",
    "the red fox jumps",
    "a red car",
    "fox",
    "the quick red fox is a common animal in the northern hemisphere, hunting small rodents at night",
]


@pytest.fixture
def model_dir(tmp_path: Path) -> Path:
    return write_model(tmp_path / "tiny")


@pytest.mark.anyio
async def test_scores_match_the_model_and_rank_shared_words_first(model_dir: Path) -> None:
    reranker = cross_encoder_reranker(model=str(model_dir))
    scores = await reranker.score(QUERY, PASSAGES)
    assert scores == pytest.approx([expected(QUERY, p) for p in PASSAGES], abs=1e-6)
    assert scores[1] > scores[2] > scores[0]
    assert all(0 < s < 1 for s in scores)
    order = await rerank(reranker, QUERY, [Candidate(p, 0.0) for p in PASSAGES], top_k=2)
    assert {i for i, _ in order} == {1, 4}


@pytest.mark.anyio
async def test_batches_and_padding_do_not_change_scores(model_dir: Path) -> None:
    passages = PASSAGES * 3 + ["red " * 40 + "fox"]
    one_batch = await cross_encoder_reranker(model=str(model_dir), batch_size=64).score(QUERY, passages)
    small_batches = await cross_encoder_reranker(model=str(model_dir), batch_size=2).score(QUERY, passages)
    assert small_batches == pytest.approx(one_batch, abs=1e-6)
    assert one_batch == pytest.approx([expected(QUERY, p) for p in passages], abs=1e-6)


@pytest.mark.anyio
async def test_the_exports_own_128_token_truncation_is_replaced(model_dir: Path) -> None:
    late = "lorem ipsum " * 100 + "red fox"  # the query's words sit beyond token 128
    full = await cross_encoder_reranker(model=str(model_dir), max_tokens=512).score(QUERY, [late, "nothing"])
    assert full[0] == pytest.approx(expected(QUERY, late, 512), abs=1e-6)
    assert full[0] > full[1]
    cut = await cross_encoder_reranker(model=str(model_dir), max_tokens=64).score(QUERY, [late])
    assert cut[0] == pytest.approx(expected(QUERY, late, 64), abs=1e-6)
    assert cut[0] < full[0]


@pytest.mark.anyio
async def test_raw_logits_without_activation(model_dir: Path) -> None:
    scores = await cross_encoder_reranker(model=str(model_dir), activation="none").score(QUERY, PASSAGES[:2])
    assert scores == pytest.approx([expected(QUERY, p, sigmoid=False) for p in PASSAGES[:2]], abs=1e-6)
    assert scores[1] - scores[0] >= 2.0  # "red", "fox" shared: two more tokens than the banana passage


@pytest.mark.anyio
async def test_a_model_without_token_types_gets_only_its_inputs(tmp_path: Path) -> None:
    directory = write_model(tmp_path / "xlmr-like", with_token_types=False)
    scores = await cross_encoder_reranker(model=str(directory), activation="none").score(
        QUERY, ["a b", "a b c d"]
    )
    tokenizer = Tokenizer.from_str(TOKENIZER_JSON)
    tokenizer.no_truncation()
    tokenizer.no_padding()
    lengths = [len(tokenizer.encode(QUERY, p).ids) for p in ("a b", "a b c d")]
    assert scores == pytest.approx([SCALE * n + BIAS for n in lengths])


@pytest.mark.anyio
async def test_found_by_name_in_the_toolkernel_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOOLKERNEL_MODELS", str(tmp_path / "models"))
    write_model(tmp_path / "models" / "acme" / "tiny-reranker", onnx_name="onnx/model_quint8.onnx")
    reranker = cross_encoder_reranker(model="acme/tiny-reranker", onnx_file="onnx/model_quint8.onnx")
    assert await reranker.score(QUERY, ["red fox"]) == pytest.approx([expected(QUERY, "red fox")])


@pytest.mark.anyio
async def test_default_model_found_in_a_hugging_face_snapshot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TOOLKERNEL_MODELS", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "empty"))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    snapshot = tmp_path / "hub" / "models--cross-encoder--ms-marco-MiniLM-L-6-v2" / "snapshots" / "0123abc"
    write_model(snapshot, onnx_name="onnx/model.onnx")
    reranker = cross_encoder_reranker()
    await reranker.load()
    assert await reranker.score(QUERY, ["red fox"]) == pytest.approx([expected(QUERY, "red fox")])


@pytest.mark.anyio
async def test_registered_through_the_kernel(model_dir: Path, kernel_with: Any) -> None:
    reranker = kernel_with(rerank_plugin).reranker("cross-encoder", model=str(model_dir), batch_size=4)
    assert isinstance(reranker, Reranker)
    assert await reranker.score(QUERY, ["red fox"]) == pytest.approx([expected(QUERY, "red fox")])


@pytest.mark.anyio
async def test_missing_models_say_where_they_were_looked_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TOOLKERNEL_MODELS", str(tmp_path / "models"))
    with pytest.raises(RerankError, match=r"'acme/absent' is not in a model cache \(looked under .*models"):
        await cross_encoder_reranker(model="acme/absent").load()
    with pytest.raises(RerankError, match="does not exist"):
        await cross_encoder_reranker(model=str(tmp_path / "nowhere")).load()
    (tmp_path / "no-tokenizer").mkdir()
    onnx.save(overlap_graph(), str(tmp_path / "no-tokenizer" / "model.onnx"))
    with pytest.raises(
        RerankError, match=r"no model\.onnx or onnx/model\.onnx with a tokenizer\.json beside it"
    ):
        await cross_encoder_reranker(model=str(tmp_path / "no-tokenizer")).load()


@pytest.mark.anyio
async def test_broken_files_are_reported(model_dir: Path, tmp_path: Path) -> None:
    broken = write_model(tmp_path / "broken")
    (broken / "model.onnx").write_bytes(b"not a model")
    with pytest.raises(RerankError, match=r"onnxruntime cannot load .*model\.onnx"):
        await cross_encoder_reranker(model=str(broken)).load()
    bad_tokenizer = write_model(tmp_path / "bad-tokenizer")
    (bad_tokenizer / "tokenizer.json").write_text("{}")
    with pytest.raises(RerankError, match="cannot read tokenizer"):
        await cross_encoder_reranker(model=str(bad_tokenizer)).load()
    image = helper.make_graph(
        [helper.make_node("Identity", ["pixel_values"], ["logits"])],
        "image-model",
        [helper.make_tensor_value_info("pixel_values", TensorProto.FLOAT, ["batch", 1])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 1])],
    )
    onnx.save(
        helper.make_model(image, opset_imports=[helper.make_opsetid("", 17)]), str(model_dir / "model.onnx")
    )
    with pytest.raises(RerankError, match=r"takes inputs \['pixel_values'\]; expected input_ids"):
        await cross_encoder_reranker(model=str(model_dir)).load()


@pytest.mark.anyio
async def test_bad_input_and_options_are_rejected(model_dir: Path) -> None:
    reranker = cross_encoder_reranker(model=str(model_dir))
    with pytest.raises(RerankError, match="query must be a string, got NoneType"):
        await reranker.score(None, ["a"])  # type: ignore[arg-type]
    with pytest.raises(RerankError, match="passage 0 must be a string, got bytes"):
        await reranker.score("q", [b"a"])  # type: ignore[list-item]
    assert await reranker.score("q", []) == []
    with pytest.raises(ValidationError, match="batch_size"):
        cross_encoder_reranker(model=str(model_dir), batch_size=0)
    with pytest.raises(ValidationError, match="activation"):
        cross_encoder_reranker(model=str(model_dir), activation="softmax")
