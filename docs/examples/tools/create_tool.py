"""Tools from explicit schemas: ``create_tool(id=..., input_schema=..., execute=...)``."""

from pydantic import BaseModel

from toolkernel import MCPServer, ToolResult, create_tool


class Query(BaseModel):
    text: str
    limit: int = 3


async def search_docs(query: Query, ctx):
    hits = [f"{query.text} result {i}" for i in range(1, query.limit + 1)]
    return {"hits": hits}


search = create_tool(
    id="search",
    description="Search the documentation.",
    input_schema=Query,  # execute receives a Query instance
    output_schema={
        "type": "object",
        "properties": {"hits": {"type": "array", "items": {"type": "string"}}},
        "required": ["hits"],
    },
    execute=search_docs,
)


def resize(data, ctx):
    # A JSON Schema input: execute receives the validated dict.
    width, height = data["width"], data["height"]
    return ToolResult(
        content=[f"resized to {width}x{height}"],
        structured={"width": width, "height": height},
        meta={"example.com/cached": False},
    )


resize_tool = create_tool(
    id="resize",
    description="Resize the canvas.",
    input_schema={
        "type": "object",
        "properties": {"width": {"type": "integer", "minimum": 1}, "height": {"type": "integer"}},
        "required": ["width", "height"],
        "additionalProperties": False,
    },
    execute=resize,
)

app = MCPServer("docs", tools=[search, resize_tool])
