"""Where sync tools run: worker threads, or the event loop once their calls show them short."""

from __future__ import annotations

import contextvars
import gc
import threading
import time

import pytest

from toolkernel import ConfigError, MCPServer, ToolContext, tool
from toolkernel._sync_calls import LONG_S, PROVING_CALLS
from toolkernel.errors import ToolExecutionError

pytestmark = pytest.mark.anyio


def _recording(where: list[bool]):  # type: ignore[no-untyped-def]
    """A short sync tool that records, per call, whether it ran on the test's (the loop's) thread."""
    loop_thread = threading.get_ident()

    def quick(text: str = "x") -> str:
        """Return the text."""
        where.append(threading.get_ident() == loop_thread)
        return text

    return quick


async def _until_on_the_loop(server: MCPServer, name: str, where: list[bool]) -> None:
    """Call ``name`` until a call runs on the loop. A call the OS preempts on a busy machine
    looks like one that waited and restarts the proof, so this allows many more calls than
    :data:`PROVING_CALLS`."""
    for _ in range(PROVING_CALLS * 50):
        await server.execute_tool(name)
        if where[-1]:
            return
    raise AssertionError(f"{name} never moved onto the event loop in {len(where)} calls")


async def test_a_short_sync_tool_moves_onto_the_event_loop_after_its_proving_calls(kernel):
    where: list[bool] = []
    server = MCPServer("s", tools=[_recording(where)], kernel=kernel)
    await _until_on_the_loop(server, "quick", where)
    assert len(where) > PROVING_CALLS
    assert not any(where[:PROVING_CALLS])  # proved in worker threads first
    for _ in range(20):
        assert await server.execute_tool("quick", {"text": "t"}) == "t"
    assert where[-20:] == [True] * 20  # then on the loop, and there it stays


async def test_a_sync_tool_that_waits_stays_in_worker_threads(kernel):
    loop_thread = threading.get_ident()
    where: list[bool] = []

    @tool
    def waits() -> str:
        """Sleep briefly: short in wall time, but it waits rather than computes."""
        where.append(threading.get_ident() == loop_thread)
        time.sleep(0.0003)
        return "ok"

    server = MCPServer("s", tools=[waits], kernel=kernel)
    for _ in range(PROVING_CALLS * 2):
        await server.execute_tool("waits")
    assert not any(where)


@pytest.mark.parametrize("slow_by", ["computing", "waiting"])
async def test_a_long_call_on_the_loop_sends_the_tool_back_to_threads_for_good(kernel, capsys, slow_by):
    loop_thread = threading.get_ident()
    where: list[bool] = []
    slow = {"now": False}

    @tool
    def sometimes_slow() -> str:
        """Short, except once: then it computes, or sleeps, for twice the limit."""
        where.append(threading.get_ident() == loop_thread)
        if slow["now"]:
            slow["now"] = False
            if slow_by == "waiting":
                time.sleep(2 * LONG_S)
            else:
                end = time.thread_time() + 2 * LONG_S  # CPU time: a busy machine may preempt the loop
                while time.thread_time() < end:
                    pass
        return "ok"

    server = MCPServer("s", tools=[sometimes_slow], kernel=kernel)
    await _until_on_the_loop(server, "sometimes_slow", where)
    slow["now"] = True
    capsys.readouterr()
    await server.execute_tool("sometimes_slow")
    assert where[-1] is True  # that call ran on the loop, and was caught running long
    warnings = [
        line for line in capsys.readouterr().err.splitlines() if "moved back to worker threads" in line
    ]
    assert len(warnings) == 1
    assert "sometimes_slow" in warnings[0]
    del where[:]
    for _ in range(PROVING_CALLS * 2):
        await server.execute_tool("sometimes_slow")
    assert not any(where)  # short again, but it stays in threads


async def test_a_garbage_collection_in_a_call_on_the_loop_leaves_the_tool_there(kernel, capsys):
    """A collection would hold the GIL in a thread as well: its time is not the tool's."""
    loop_thread = threading.get_ident()
    where: list[bool] = []
    collect = {"now": False}
    heap = [[] for _ in range(600_000)]  # a full collection walks these: about 10 ms here

    @tool
    def collects_once() -> str:
        """Short, except once: then a full garbage collection runs inside it."""
        where.append(threading.get_ident() == loop_thread)
        if collect["now"]:
            collect["now"] = False
            started = time.perf_counter()
            gc.collect()
            collect["took"] = time.perf_counter() - started
        return "ok"

    server = MCPServer("s", tools=[collects_once], kernel=kernel)
    await _until_on_the_loop(server, "collects_once", where)
    collect["now"] = True
    await server.execute_tool("collects_once")
    assert collect["took"] > LONG_S  # else this test shows nothing
    for _ in range(10):
        await server.execute_tool("collects_once")
    assert where[-11:] == [True] * 11
    assert "moved back to worker threads" not in capsys.readouterr().err
    del heap


async def test_blocking_and_the_context_decide_the_place_from_the_first_call(kernel):
    """``blocking=True`` keeps a tool in threads, ``blocking=False`` puts it on the loop, and a
    tool taking the ToolContext (it may poll ``ctx.cancel_requested``, which changes only while
    the loop runs) stays in threads unless declared ``blocking=False``."""
    loop_thread = threading.get_ident()
    where: dict[str, list[bool]] = {"kept": [], "looped": [], "watching": [], "declared": []}

    def here(name: str) -> str:
        where[name].append(threading.get_ident() == loop_thread)
        return name

    @tool(blocking=True)
    def kept() -> str:
        """Always in a worker thread."""
        return here("kept")

    @tool(blocking=False)
    def looped() -> str:
        """Always on the event loop."""
        return here("looped")

    @tool
    def watching(ctx: ToolContext) -> str:
        """May poll ctx.cancel_requested."""
        return here("watching")

    @tool(blocking=False)
    def declared(ctx: ToolContext) -> str:
        """Declared short by its author."""
        return here("declared")

    server = MCPServer("s", tools=[kept, looped, watching, declared], kernel=kernel)
    for _ in range(PROVING_CALLS * 2):
        for name in where:
            assert await server.execute_tool(name) == name
    assert {name: set(places) for name, places in where.items()} == {
        "kept": {False},
        "looped": {True},
        "watching": {False},
        "declared": {True},
    }


async def test_a_call_on_the_loop_keeps_its_context_variables_to_itself(kernel):
    seen: contextvars.ContextVar[str] = contextvars.ContextVar("seen", default="caller")

    @tool(blocking=False)
    def sets_a_variable() -> str:
        """Set a context variable, as a library might."""
        before = seen.get()
        seen.set("tool")
        return before

    server = MCPServer("s", tools=[sets_a_variable], kernel=kernel)
    seen.set("caller")
    assert await server.execute_tool("sets_a_variable") == "caller"
    assert seen.get() == "caller"


async def test_an_error_raised_on_the_loop_reaches_the_caller_as_in_a_thread(kernel):
    @tool(blocking=False)
    def fails() -> str:
        """Raise."""
        raise ValueError("bad input 42")

    server = MCPServer("s", tools=[fails], kernel=kernel)
    with pytest.raises(ToolExecutionError, match="bad input 42"):
        await server.execute_tool("fails")


@pytest.mark.parametrize("bad", [1, "yes", 0.0])
def test_blocking_must_be_a_bool_or_none(bad):
    def f() -> str:
        return ""

    with pytest.raises(ConfigError, match="blocking must be a bool or None"):
        tool(blocking=bad)(f)
