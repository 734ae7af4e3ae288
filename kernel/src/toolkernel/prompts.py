"""Prompts a server offers, with arguments, completion and selectable versions."""

from __future__ import annotations

import inspect
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from toolkernel.errors import ConfigError
from toolkernel.resources import Completer

__all__ = [
    "Prompt",
    "PromptArgument",
    "PromptOutput",
    "prompt",
]

_NAME = re.compile(r"^[A-Za-z0-9_\-.]{1,128}$")

PromptOutput = str | Sequence[Any]
"""A string (one user message) or a list of prompt messages (dicts or ``PromptMessage``)."""


@dataclass(frozen=True, slots=True)
class PromptArgument:
    """One named argument of a prompt."""

    name: str
    description: str | None = None
    required: bool = False


@dataclass(eq=False)
class Prompt:
    """A prompt template: ``render(**arguments)`` returns its messages.

    A ``render`` parameter annotated :class:`~toolkernel.ToolContext` is not an
    argument: it receives the request's context, to ask the client for input.

    Several prompts may share a ``name`` with different ``version`` strings; clients
    get the one added last unless they select one with ``_meta["toolkernel/version"]``.
    """

    name: str
    render: Callable[..., PromptOutput | Awaitable[PromptOutput]]
    description: str | None = None
    arguments: Sequence[PromptArgument] | None = None
    title: str | None = None
    version: str | None = None
    complete: Mapping[str, Completer] = field(default_factory=dict)
    meta: dict[str, Any] | None = None
    scopes: tuple[str, ...] = ()
    """OAuth scopes a caller needs to see and get it (enforced when the server has auth on)."""
    context_param: str | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        if not _NAME.match(self.name):
            raise ConfigError(
                f"prompt name {self.name!r} is not valid: 1-128 characters from A-Z a-z 0-9 _ - ."
            )
        if not callable(self.render):
            raise ConfigError(f"prompt {self.name!r}: render must be callable")
        self.context_param = _context_param(self.render)
        if self.arguments is None:
            self.arguments = _arguments_from_signature(self.render, self.context_param)
        names = {a.name for a in self.arguments}
        unknown = set(self.complete) - names
        if unknown:
            raise ConfigError(f"prompt {self.name!r}: completion for unknown arguments {sorted(unknown)}")

    @property
    def key(self) -> str:
        """``name`` or ``name@version``: how registries tell versions apart."""
        return f"{self.name}@{self.version}" if self.version else self.name

    def check_arguments(self, given: Mapping[str, str] | None) -> dict[str, str]:
        """The arguments to render with; a :class:`ValueError` names missing or unknown ones."""
        given = dict(given or {})
        declared = {a.name: a for a in self.arguments or ()}
        missing = [a.name for a in declared.values() if a.required and a.name not in given]
        unknown = [k for k in given if k not in declared]
        if missing or unknown:
            problems = []
            if missing:
                problems.append(f"missing required argument(s) {', '.join(missing)}")
            if unknown:
                problems.append(f"unknown argument(s) {', '.join(unknown)}")
            raise ValueError(f"prompt {self.name!r}: " + "; ".join(problems))
        return given


def prompt(
    *,
    name: str | None = None,
    description: str | None = None,
    title: str | None = None,
    version: str | None = None,
    complete: Mapping[str, Completer] | None = None,
    scopes: Sequence[str] = (),
) -> Callable[[Callable[..., Any]], Prompt]:
    """Make a :class:`Prompt` from a function whose parameters are its arguments."""

    def build(fn: Callable[..., Any]) -> Prompt:
        return Prompt(
            name=name or fn.__name__,
            render=fn,
            description=description
            if description is not None
            else inspect.cleandoc(fn.__doc__ or "") or None,
            title=title,
            version=version,
            complete=dict(complete or {}),
            scopes=tuple(scopes.split() if isinstance(scopes, str) else scopes),
        )

    return build


def _arguments_from_signature(fn: Callable[..., Any], context_param: str | None) -> list[PromptArgument]:
    return [
        PromptArgument(name=p.name, required=p.default is p.empty)
        for p in inspect.signature(fn).parameters.values()
        if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD) and p.name != context_param
    ]


def _context_param(fn: Callable[..., Any]) -> str | None:
    """The parameter annotated :class:`~toolkernel.ToolContext`: a prompt that takes one can ask
    the client for input while rendering (``ctx.elicit``, ``ctx.sample``, ``ctx.list_roots``)."""
    from typing import get_type_hints

    from toolkernel.context import ToolContext

    try:
        hints = get_type_hints(fn)
    except (NameError, TypeError):
        return None
    return next((name for name, hint in hints.items() if hint is ToolContext and name != "return"), None)
