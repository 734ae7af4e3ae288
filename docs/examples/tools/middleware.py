"""Server middleware: fill request values, cache answers, and keep the chain order in mind."""

from toolkernel import MCPServer

cache = {}


async def default_tenant(call, call_next):
    call.context.values.setdefault("tenant", "public")
    return await call_next(call)


async def cached(call, call_next):
    if not (call.tool.annotations and call.tool.annotations.idempotent_hint):
        return await call_next(call)
    key = (call.tool.name, call.context.values["tenant"], repr(sorted(call.arguments.items())))
    if key not in cache:
        outcome = await call_next(call)
        if outcome.is_error:
            return outcome
        cache[key] = outcome
    return cache[key]


app = MCPServer("cached", middleware=[default_tenant, cached])
lookups = []


@app.tool(annotations={"idempotentHint": True})
def lookup(word: str) -> str:
    """Look a word up (slowly, in real life)."""
    lookups.append(word)
    return f"{word}: a word"
