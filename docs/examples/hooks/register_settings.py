"""A plugin with typed settings, validated at start-up, read inside a tool."""

from pydantic import BaseModel, Field

from toolkernel import ToolContext, hookimpl, tool


class GreeterSettings(BaseModel):
    greeting: str = "Hello"
    exclaim: int = Field(1, ge=0, le=5)


@tool
def greet(name: str, ctx: ToolContext) -> str:
    """Greet someone the configured way."""
    settings = ctx.server.kernel.settings("greeter")
    return f"{settings.greeting}, {name}" + "!" * settings.exclaim


@hookimpl
def register_settings(registry):
    registry.add("greeter", GreeterSettings)


@hookimpl
def register_tools(registry):
    registry.add(greet)
