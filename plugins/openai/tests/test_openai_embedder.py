"""Tests of ``openai/<model>`` against a real HTTP server on 127.0.0.1 speaking ``/v1/embeddings``.

The server stands in for a hosted embeddings API, which cannot be reached from here: it serves
deterministic vectors (derived from a hash of each text) and can be told to answer the
next requests with an error status, a ``Retry-After`` header, or a delay.
"""

from __future__ import annotations

import email.utils
import hashlib
import pathlib
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import anyio
import httpx
import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from toolkernel import Kernel
from toolkernel.embedders import Embedder
from toolkernel_openai import plugin
from toolkernel_openai.embedder import OpenAIEmbedder, OpenAIEmbedderError, openai_embedder

API_KEY = "test-key"
DIMENSION = 8


def fake_vector(text: str, dimension: int = DIMENSION) -> list[float]:
    """The vector the stand-in server returns for ``text``: a fixed function of its hash."""
    digest = hashlib.sha256(text.encode()).digest()
    return [digest[i] / 255 for i in range(dimension)]


@dataclass
class Failure:
    """One scripted answer: an error status (with optional Retry-After) or a delay before answering."""

    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0


@dataclass
class ServerState:
    """What the tests script (``failures``) and what the server saw (``requests``, ``times``)."""

    failures: list[Failure] = field(default_factory=list)
    requests: list[dict[str, object]] = field(default_factory=list)
    times: list[float] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def fail_next(self, *failures: Failure) -> None:
        """Answer the next requests with ``failures``, in order."""
        with self.lock:
            self.failures.extend(failures)

    def reset(self) -> None:
        """Forget scripted failures and recorded requests."""
        with self.lock:
            self.failures.clear()
            self.requests.clear()
            self.times.clear()


def make_app(state: ServerState) -> Starlette:
    """The stand-in API: checks the bearer token, plays scripted failures, returns shuffled data."""

    async def embeddings(request: Request) -> JSONResponse:
        body = await request.json()
        with state.lock:
            state.requests.append(body)
            state.times.append(time.monotonic())
            failure = state.failures.pop(0) if state.failures else Failure()
        if failure.delay:
            await anyio.sleep(failure.delay)
        if request.headers.get("authorization") != f"Bearer {API_KEY}":
            return JSONResponse({"error": {"message": "Incorrect API key provided"}}, status_code=401)
        if failure.status != 200:
            headers = failure.headers
            message = {"error": {"message": f"scripted {failure.status}"}}
            return JSONResponse(message, status_code=failure.status, headers=headers)
        if not isinstance(body.get("input"), list) or body.get("model") == "missing-model":
            return JSONResponse({"error": {"message": "The model does not exist"}}, status_code=404)
        dimension = int(body.get("dimensions", DIMENSION))
        data = [
            {"object": "embedding", "index": i, "embedding": fake_vector(text, dimension)}
            for i, text in enumerate(body["input"])
        ]
        data.reverse()  # real servers may answer out of order; clients must sort by index
        return JSONResponse({"object": "list", "data": data, "model": body["model"]})

    return Starlette(routes=[Route("/v1/embeddings", embeddings, methods=["POST"])])


@dataclass
class FakeAPI:
    """Where the stand-in server listens and its shared state."""

    base_url: str
    state: ServerState


@pytest.fixture(scope="session")
def _fake_api_server() -> Iterator[FakeAPI]:
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
            raise RuntimeError("the stand-in embeddings server did not start within 10 s")
        time.sleep(0.01)
    yield FakeAPI(f"http://127.0.0.1:{port}/v1", state)
    server.should_exit = True
    thread.join(timeout=10)
    sock.close()


@pytest.fixture
def fake_api(_fake_api_server: FakeAPI) -> Iterator[FakeAPI]:
    """The stand-in API with no scripted failures and no recorded requests."""
    _fake_api_server.state.reset()
    yield _fake_api_server
    _fake_api_server.state.reset()


def make(api: FakeAPI, **options: object) -> OpenAIEmbedder:
    """An embedder aimed at the stand-in API, with quick backoff unless a test says otherwise."""
    settings: dict[str, object] = {"base_url": api.base_url, "api_key": API_KEY, "backoff_initial": 0.01}
    settings.update(options)
    return openai_embedder("fake-embed", **settings)


@pytest.mark.anyio
async def test_batches_keep_order_and_learn_dimension(fake_api: FakeAPI) -> None:
    texts = [f"text number {i}" for i in range(10)]
    async with make(fake_api, max_batch_size=3, max_concurrency=2) as embedder:
        vectors = await embedder.embed(texts)
        assert embedder.dimension == DIMENSION
    assert vectors == [fake_vector(t) for t in texts]
    assert sorted(len(r["input"]) for r in fake_api.state.requests) == [1, 3, 3, 3]  # type: ignore[arg-type]
    assert all(r["encoding_format"] == "float" for r in fake_api.state.requests)


@pytest.mark.anyio
async def test_dimension_is_given_known_or_probed(fake_api: FakeAPI) -> None:
    assert openai_embedder("text-embedding-3-small").dimension == 1536
    assert make(fake_api, dimension=8).dimension == 8
    embedder = make(fake_api)
    with pytest.raises(OpenAIEmbedderError, match="probe"):
        _ = embedder.dimension
    assert await embedder.probe() == DIMENSION
    await embedder.aclose()


@pytest.mark.anyio
async def test_requested_dimensions_are_sent(fake_api: FakeAPI) -> None:
    async with make(fake_api, dimension=4, request_dimensions=True) as embedder:
        assert await embedder.embed(["a"]) == [fake_vector("a", 4)]
    assert fake_api.state.requests[0]["dimensions"] == 4


@pytest.mark.anyio
async def test_server_errors_are_retried(fake_api: FakeAPI) -> None:
    fake_api.state.fail_next(Failure(500), Failure(503))
    async with make(fake_api) as embedder:
        assert await embedder.embed(["x", "y"]) == [fake_vector("x"), fake_vector("y")]
    assert len(fake_api.state.requests) == 3


@pytest.mark.anyio
@pytest.mark.parametrize(
    "headers",
    [
        pytest.param(lambda: {"Retry-After": "1"}, id="seconds"),
        pytest.param(lambda: {"retry-after-ms": "1000"}, id="milliseconds"),
        pytest.param(
            lambda: {"Retry-After": email.utils.formatdate(time.time() + 2, usegmt=True)}, id="date"
        ),
    ],
)
async def test_429_waits_as_long_as_retry_after_says(
    fake_api: FakeAPI, headers: Callable[[], dict[str, str]]
) -> None:
    fake_api.state.fail_next(Failure(429, headers=headers()))
    async with make(fake_api) as embedder:
        await embedder.embed(["x"])
    first, second = fake_api.state.times
    assert second - first >= 0.95


@pytest.mark.anyio
async def test_retry_after_beyond_the_limit_fails_at_once(fake_api: FakeAPI) -> None:
    fake_api.state.fail_next(Failure(429, headers={"Retry-After": "3600"}))
    async with make(fake_api, max_retry_after=10) as embedder:
        with pytest.raises(OpenAIEmbedderError, match=r"batch 1/1 .*wait 3600 s"):
            await embedder.embed(["x"])
    assert len(fake_api.state.requests) == 1


@pytest.mark.anyio
async def test_persistent_failure_names_the_batch(fake_api: FakeAPI) -> None:
    fake_api.state.fail_next(*[Failure(500)] * 3)
    texts = ["a", "b", "c", "d", "e"]
    async with make(fake_api, max_batch_size=2, max_concurrency=1, max_retries=2) as embedder:
        with pytest.raises(OpenAIEmbedderError) as caught:
            await embedder.embed(texts)
    assert str(caught.value) == (
        "openai/fake-embed: batch 1/3 (texts 0-1) failed after 3 attempts: HTTP 500: scripted 500"
    )


@pytest.mark.anyio
async def test_every_request_has_a_timeout(fake_api: FakeAPI) -> None:
    fake_api.state.fail_next(Failure(delay=1.0))
    async with make(fake_api, timeout=0.2) as embedder:
        assert await embedder.embed(["slow"]) == [fake_vector("slow")]
    fake_api.state.fail_next(Failure(delay=1.0), Failure(delay=1.0))
    async with make(fake_api, timeout=0.2, max_retries=1) as embedder:
        with pytest.raises(OpenAIEmbedderError, match=r"failed after 2 attempts: timed out after 0.2 s"):
            await embedder.embed(["slow"])


@pytest.mark.anyio
async def test_client_errors_are_not_retried(fake_api: FakeAPI) -> None:
    async with make(fake_api, api_key="wrong") as embedder:
        with pytest.raises(OpenAIEmbedderError, match="HTTP 401: Incorrect API key provided"):
            await embedder.embed(["x"])
    async with openai_embedder("missing-model", base_url=fake_api.base_url, api_key=API_KEY) as embedder:
        with pytest.raises(OpenAIEmbedderError, match="HTTP 404: The model does not exist"):
            await embedder.embed(["x"])
    assert len(fake_api.state.requests) == 2


@pytest.mark.anyio
async def test_wrong_vector_length_is_reported(fake_api: FakeAPI) -> None:
    async with make(fake_api, dimension=16) as embedder:
        with pytest.raises(OpenAIEmbedderError, match=r"length \[8\], expected 16"):
            await embedder.embed(["x"])


@pytest.mark.anyio
async def test_environment_supplies_defaults(fake_api: FakeAPI, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", fake_api.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", API_KEY)
    async with openai_embedder("fake-embed") as embedder:
        assert await embedder.embed(["env"]) == [fake_vector("env")]


@pytest.mark.anyio
async def test_injected_client_is_used_and_left_open(fake_api: FakeAPI) -> None:
    async with httpx.AsyncClient(headers={"x-caller": "test"}) as client:
        async with make(fake_api, client=client) as embedder:
            assert await embedder.embed([]) == []
            await embedder.embed(["x"])
        assert not client.is_closed
    assert len(fake_api.state.requests) == 1


def test_unknown_options_fail_with_the_field_name() -> None:
    with pytest.raises(ValueError, match="max_batch"):
        openai_embedder("m", max_batch=3)


def test_the_kernel_builds_openai_embedders_by_name(kernel_with: Callable[..., Kernel]) -> None:
    embedder = kernel_with(plugin).embedder("openai/text-embedding-3-large", api_key="k")
    assert isinstance(embedder, Embedder)
    assert embedder.name == "openai/text-embedding-3-large"
    assert embedder.dimension == 3072


def test_the_kernel_builds_the_embedder_from_its_settings(tmp_path: pathlib.Path) -> None:
    from toolkernel import ConfigError

    config = tmp_path / "toolkernel.toml"
    config.write_text('[plugins.openai]\nbase_url = "http://127.0.0.1:9/v1"\nmax_batch_size = 16\n')
    kernel = Kernel.from_config(config, load_entry_points=False, plugins=[plugin])
    embedder = kernel.embedder("openai/bge-small", dimension=384)  # call options win over the table
    assert isinstance(embedder, OpenAIEmbedder)
    assert (embedder._options.base_url, embedder._options.max_batch_size) == ("http://127.0.0.1:9/v1", 16)
    assert embedder.dimension == 384
    with pytest.raises(
        ConfigError, match=r"\[plugins\.openai\] max_batch from the call's options: unknown key"
    ):
        kernel.embedder("openai/bge-small", max_batch=3)
