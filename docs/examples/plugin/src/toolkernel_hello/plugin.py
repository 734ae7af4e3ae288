"""The toolkernel-hello plugin: only hook implementations and cheap imports."""

from pydantic import BaseModel
from toolkernel import MissingDependencyError, ToolContext, hookimpl, tool


class HelloSettings(BaseModel):
    greeting: str = "Hello"
    emoji: bool = False


def decorate(text: str) -> str:
    try:
        import emoji  # an optional backend: imported on use, never at module level
    except ImportError:
        raise MissingDependencyError(
            "toolkernel-hello: emoji=true needs the emoji package: pip install 'toolkernel-hello[emoji]'"
        ) from None
    return emoji.emojize(f"{text} :waving_hand:")


@tool
def hello(name: str, ctx: ToolContext) -> str:
    """Greet someone by name."""
    settings = ctx.server.kernel.settings("hello")
    text = f"{settings.greeting}, {name}!"
    return decorate(text) if settings.emoji else text


@hookimpl
def register_settings(registry):
    registry.add("hello", HelloSettings)


@hookimpl
def register_tools(registry):
    registry.add(hello)
