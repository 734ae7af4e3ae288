"""Tests of the ``http`` reranker against a real HTTP server on 127.0.0.1 speaking ``/v1/rerank``.

The server stands in for Cohere's or Jina's hosted rerank API, which cannot be reached from here:
it scores each document by the share of the query's words it contains, answers best first with
indexes only (as the real APIs do), and can be told to answer the next requests with an error
status, a ``Retry-After`` header, a delay, or a malformed body.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import anyio
import pytest
import uvicorn
from pydantic import ValidationError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from toolkernel.rerankers import Reranker
from toolkernel_rag.rerankers import Candidate, RerankError, rerank
from toolkernel_rag.rerankers import plugin as rerank_plugin
from toolkernel_rag.rerankers.http import HttpReranker, http_reranker

API_KEY = "test-key"


def overlap(query: str, document: str) -> float:
    """The stand-in's relevance: the share of the query's words that occur in the document."""
    wanted = set(query.lower().split())
    return len(wanted & set(document.lower().split())) / len(wanted)


@dataclass
class Scripted:
    """One scripted answer: a status (with headers), a delay, or a body to send instead of the real one."""

    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    body: Any = None


@dataclass
class ServerState:
    """What the tests script (``scripted``) and what the server saw (``requests``, ``times``)."""

    scripted: list[Scripted] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)
    times: list[float] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def script(self, *answers: Scripted) -> None:
        with self.lock:
            self.scripted.extend(answers)

    def reset(self) -> None:
        with self.lock:
            self.scripted.clear()
            self.requests.clear()
            self.times.clear()


def make_app(state: ServerState) -> Starlette:
    """The stand-in API: checks the token, plays scripted answers, returns ``top_n`` results best first."""

    async def rerank_route(request: Request) -> JSONResponse:
        body = await request.json()
        with state.lock:
            state.requests.append(body)
            state.times.append(time.monotonic())
            answer = state.scripted.pop(0) if state.scripted else Scripted()
        if answer.delay:
            await anyio.sleep(answer.delay)
        if request.headers.get("authorization") != f"Bearer {API_KEY}":
            return JSONResponse({"message": "invalid api token"}, status_code=401)
        if answer.status != 200:
            return JSONResponse({"message": f"scripted {answer.status}"}, answer.status, answer.headers)
        if answer.body is not None:
            return JSONResponse(answer.body)
        if not body.get("documents") or not isinstance(body.get("query"), str):
            return JSONResponse({"message": "documents and query are required"}, status_code=400)
        scored = [
            {"index": i, "relevance_score": overlap(body["query"], doc)}
            for i, doc in enumerate(body["documents"])
        ]
        scored.sort(key=lambda r: -r["relevance_score"])
        return JSONResponse({"id": "r1", "results": scored[: body.get("top_n")], "meta": {}})

    return Starlette(routes=[Route("/v1/rerank", rerank_route, methods=["POST"])])


@dataclass
class StandIn:
    base_url: str
    state: ServerState


@pytest.fixture(scope="module")
def _server() -> Iterator[StandIn]:
    """Run the stand-in API under uvicorn in a thread on a free port of 127.0.0.1."""
    state = ServerState()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(make_app(state), log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if time.monotonic() > deadline:
            raise RuntimeError("the stand-in rerank server did not start within 10 s")
        time.sleep(0.01)
    yield StandIn(f"http://127.0.0.1:{port}/v1", state)
    server.should_exit = True
    thread.join(timeout=10)
    sock.close()


@pytest.fixture
def api(_server: StandIn) -> Iterator[StandIn]:
    _server.state.reset()
    yield _server
    _server.state.reset()


def make(api: StandIn, **options: Any) -> HttpReranker:
    settings: dict[str, Any] = {"model": "rerank-test", "base_url": api.base_url, "api_key": API_KEY}
    settings.update({"backoff_initial": 0.01, **options})
    return http_reranker(**settings)


PASSAGES = [
    "bananas are yellow",
    "the red fox jumps",
    "a red car",
    "fox",
    "red fox red fox",
    "nothing here",
    "the quick red fox",
]


@pytest.mark.anyio
async def test_scores_come_back_in_passage_order_in_batches(api: StandIn) -> None:
    async with make(api, max_batch_size=3, max_concurrency=2) as reranker:
        scores = await reranker.score("red fox", PASSAGES)
    assert scores == [overlap("red fox", p) for p in PASSAGES]
    assert sorted(len(r["documents"]) for r in api.state.requests) == [1, 3, 3]
    first = next(r for r in api.state.requests if r["documents"] == PASSAGES[:3])
    assert first == {
        "model": "rerank-test",
        "query": "red fox",
        "documents": PASSAGES[:3],
        "top_n": 3,
        "return_documents": False,
    }


@pytest.mark.anyio
async def test_rerank_orders_candidates_by_the_api(api: StandIn) -> None:
    candidates = [Candidate(text, 1.0 - i / 10) for i, text in enumerate(PASSAGES)]
    async with make(api) as reranker:
        order = await rerank(reranker, "red fox", candidates, top_k=3)
    assert [i for i, _ in order] == [1, 4, 6]  # ties at 1.0 keep the retrieval order
    assert [s for _, s in order] == [1.0, 1.0, 1.0]


@pytest.mark.anyio
async def test_registered_through_the_kernel(api: StandIn, kernel_with: Any) -> None:
    kernel = kernel_with(rerank_plugin)
    reranker = kernel.reranker("http", model="rerank-test", base_url=api.base_url, api_key=API_KEY)
    assert isinstance(reranker, Reranker)
    assert await reranker.score("red fox", ["red fox", "blue"]) == [1.0, 0.0]
    await reranker.aclose()


@pytest.mark.anyio
async def test_server_errors_are_retried(api: StandIn) -> None:
    api.state.script(Scripted(500), Scripted(503))
    async with make(api) as reranker:
        assert await reranker.score("red fox", ["red fox"]) == [1.0]
    assert len(api.state.requests) == 3


@pytest.mark.anyio
async def test_429_waits_as_long_as_retry_after_says(api: StandIn) -> None:
    api.state.script(Scripted(429, headers={"Retry-After": "1"}))
    async with make(api) as reranker:
        await reranker.score("red fox", ["red fox"])
    first, second = api.state.times
    assert second - first >= 0.9


@pytest.mark.anyio
async def test_retries_give_up_with_the_reason(api: StandIn) -> None:
    api.state.script(*[Scripted(502)] * 3)
    async with make(api, max_retries=2) as reranker:
        with pytest.raises(
            RerankError, match=r"http:rerank-test: batch 1/1 .* failed after 3 attempts: HTTP 502"
        ):
            await reranker.score("red fox", ["red fox"])


@pytest.mark.anyio
async def test_a_retry_after_beyond_the_limit_fails_at_once(api: StandIn) -> None:
    api.state.script(Scripted(429, headers={"Retry-After": "600"}))
    async with make(api) as reranker:
        with pytest.raises(RerankError, match="asked to wait 600 s, more than max_retry_after=60 s"):
            await reranker.score("red fox", ["red fox"])
    assert len(api.state.requests) == 1


@pytest.mark.anyio
async def test_client_errors_are_not_retried_and_carry_the_api_message(api: StandIn) -> None:
    async with make(api, api_key="wrong") as reranker:
        with pytest.raises(RerankError, match="HTTP 401: invalid api token"):
            await reranker.score("red fox", ["red fox"])
    assert len(api.state.requests) == 1


@pytest.mark.anyio
async def test_a_slow_server_times_out(api: StandIn) -> None:
    api.state.script(Scripted(delay=1.0), Scripted(delay=1.0))
    async with make(api, timeout=0.2, max_retries=1) as reranker:
        with pytest.raises(RerankError, match=r"failed after 2 attempts: timed out after 0.2 s"):
            await reranker.score("red fox", ["red fox"])


@pytest.mark.anyio
async def test_an_unreachable_server_is_a_network_error() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed again before the request: nothing listens there
    reranker = http_reranker(
        model="m", base_url=f"http://127.0.0.1:{port}/v1", max_retries=1, backoff_initial=0.01
    )
    with pytest.raises(RerankError, match="network error: ConnectError"):
        await reranker.score("red fox", ["red fox"])
    await reranker.aclose()


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("body", "message"),
    [
        pytest.param({"data": []}, "not a rerank result list", id="no-results"),
        pytest.param({"results": [{"index": 0}]}, "not a rerank result list", id="no-score"),
        pytest.param(
            {"results": [{"index": 5, "relevance_score": 1}]}, r"index 5 is outside 0..1", id="range"
        ),
        pytest.param(
            {"results": [{"index": 0, "relevance_score": 1}, {"index": 0, "relevance_score": 0}]},
            "index 0 appears twice",
            id="duplicate",
        ),
        pytest.param(
            {"results": [{"index": 1, "relevance_score": 1}]}, r"no score for passages \[0\]", id="missing"
        ),
    ],
)
async def test_malformed_answers_are_errors(api: StandIn, body: Any, message: str) -> None:
    api.state.script(Scripted(body=body))
    async with make(api) as reranker:
        with pytest.raises(RerankError, match=message):
            await reranker.score("red fox", ["red fox", "blue"])


@pytest.mark.anyio
async def test_bad_input_is_rejected_before_any_request(api: StandIn) -> None:
    async with make(api) as reranker:
        with pytest.raises(RerankError, match="query is empty"):
            await reranker.score("  ", ["a"])
        with pytest.raises(RerankError, match="passage 1 must be a string, got int"):
            await reranker.score("q", ["a", 3])  # type: ignore[list-item]
        with pytest.raises(RerankError, match="passages must be a sequence of strings, got str"):
            await reranker.score("q", "abc")
        assert await reranker.score("q", []) == []
    assert api.state.requests == []


def test_configuration_errors_name_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RERANK_BASE_URL", raising=False)
    with pytest.raises(RerankError, match=r"no base_url and \$RERANK_BASE_URL is unset"):
        http_reranker(model="m")
    with pytest.raises(RerankError, match="must start with http:// or https://"):
        http_reranker(model="m", base_url="api.cohere.com/v1")
    with pytest.raises(ValidationError, match="max_batch_size"):
        http_reranker(model="m", base_url="http://x/v1", max_batch_size=0)
    with pytest.raises(ValidationError, match="top_n"):
        http_reranker(model="m", base_url="http://x/v1", top_n=3)
    monkeypatch.setenv("RERANK_BASE_URL", "https://api.jina.ai/v1/")
    assert (
        http_reranker(model="jina-reranker-v2-base-multilingual").name
        == "http:jina-reranker-v2-base-multilingual"
    )
