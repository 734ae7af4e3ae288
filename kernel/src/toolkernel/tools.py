"""The tool model: ``@tool`` on a function, or ``create_tool(...)`` from schemas and a callable.

A :class:`Tool` knows its name, description, input and output schemas, MCP annotations
and per-tool lifecycle callbacks; it validates its input (errors name the field),
runs, and turns what it returned into MCP content plus structured content checked
against its output schema. The kernel's call path (:mod:`toolkernel.calls`) adds
middleware, hooks and tracing around it.
"""

from __future__ import annotations

import inspect
import json
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, get_args, get_origin, get_type_hints, overload

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from toolkernel.context import ToolContext
from toolkernel.errors import ConfigError

if TYPE_CHECKING:
    from toolkernel._sync_calls import SyncCalls
    from toolkernel.events import ToolEvent
    from toolkernel.tasks import TaskSupport

__all__ = [
    "Tool",
    "ToolAnnotations",
    "ToolCallback",
    "ToolInputError",
    "ToolOutputError",
    "ToolResult",
    "create_tool",
    "text_block",
    "tool",
]

_TOOL_NAME = re.compile(r"^[A-Za-z0-9_\-.]{1,128}$")

ToolCallback = Callable[["ToolEvent"], Any]


class ToolAnnotations(BaseModel):
    """MCP tool annotations: hints to clients about how a tool behaves."""

    model_config = ConfigDict(frozen=True, populate_by_name=True, extra="forbid")

    title: str | None = None
    read_only_hint: bool | None = Field(None, alias="readOnlyHint")
    destructive_hint: bool | None = Field(None, alias="destructiveHint")
    idempotent_hint: bool | None = Field(None, alias="idempotentHint")
    open_world_hint: bool | None = Field(None, alias="openWorldHint")


class ToolInputError(ValueError):
    """A tool's arguments failed validation; the message names each bad field."""


class ToolOutputError(ValueError):
    """A tool returned something its output schema rejects."""


@dataclass(frozen=True, slots=True)
class ToolResult:
    """Full control over a result: content blocks, structured content and ``_meta``."""

    content: Sequence[Any] = ()
    structured: Any = None
    is_error: bool = False
    meta: dict[str, Any] | None = None


@dataclass(eq=False)
class Tool:
    """A callable the server offers to clients, with its schemas and callbacks."""

    name: str
    description: str
    fn: Callable[..., Any]
    input_schema: dict[str, Any]
    input_model: type[BaseModel] | None = None
    output_schema: dict[str, Any] | None = None
    output_model: type[BaseModel] | None = None
    title: str | None = None
    annotations: ToolAnnotations | None = None
    meta: dict[str, Any] | None = None
    context_param: str | None = None
    calling: Literal["kwargs", "input"] = "kwargs"
    scopes: tuple[str, ...] = ()
    """OAuth scopes a caller needs to see and call the tool (enforced when the server has auth on)."""
    task: TaskSupport | None = None
    task_start: Literal["call", "detach"] = "call"
    on_input_start: ToolCallback | None = None
    on_input_delta: ToolCallback | None = None
    on_input_available: ToolCallback | None = None
    on_output: ToolCallback | None = None
    check_input: Callable[[Mapping[str, Any]], None] | None = None
    """A cheap check of the raw arguments run before schema validation (say, size limits), so an
    oversized input is refused before any work; a :class:`ValueError` it raises is the isError."""
    blocking: bool | None = None
    """Where a sync tool runs (:mod:`toolkernel._sync_calls`): None learns it from the calls
    (a tool that takes the :class:`ToolContext` stays in threads), True keeps it in worker
    threads, False runs it on the event loop from the first call."""
    is_async: bool = field(init=False)
    _sync_calls: SyncCalls | None = field(default=None, init=False, repr=False)
    _input_checker: tuple[dict[str, Any], Any] | None = field(default=None, init=False, repr=False)
    """The input schema and the JSON Schema validator built for it, made on first use."""

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _TOOL_NAME.match(self.name):
            raise ConfigError(
                f"tool name {self.name!r} is not valid: 1-128 characters from A-Z a-z 0-9 _ - ."
            )
        if not isinstance(self.description, str):
            raise ConfigError(f"tool {self.name!r}: description must be a string")
        if self.task not in (None, "optional", "required"):
            raise ConfigError(
                f"tool {self.name!r}: task must be 'optional', 'required' or None, not {self.task!r}"
            )
        if self.task_start not in ("call", "detach"):
            raise ConfigError(
                f"tool {self.name!r}: task_start must be 'call' or 'detach', not {self.task_start!r}"
            )
        if self.input_schema.get("type") != "object":
            raise ConfigError(f"tool {self.name!r}: input schema must describe an object (type: object)")
        if self.blocking is not None and not isinstance(self.blocking, bool):
            raise ConfigError(f"tool {self.name!r}: blocking must be a bool or None, got {self.blocking!r}")
        self.is_async = inspect.iscoroutinefunction(self.fn) or inspect.iscoroutinefunction(
            getattr(self.fn, "__call__", None)  # noqa: B004 - async callable objects
        )
        if not self.is_async:
            from toolkernel._sync_calls import SyncCalls

            # A sync tool given the context may watch ``ctx.cancel_requested``, which changes
            # only while the loop runs: unless declared otherwise, it stays in threads.
            takes_context = self.context_param is not None or self.calling == "input"
            blocking = True if self.blocking is None and takes_context else self.blocking
            self._sync_calls = SyncCalls(self.name, blocking)

    # -- the three steps of a call ------------------------------------------------------

    def validate_input(self, arguments: Mapping[str, Any] | None) -> Any:
        """Check ``arguments`` against the input schema; :class:`ToolInputError` names the fields."""
        if arguments is not None and not isinstance(arguments, Mapping):
            raise ToolInputError(f"arguments must be an object, got {type(arguments).__name__}")
        args = arguments or {}
        if self.check_input is not None:
            try:
                self.check_input(args)
            except ValueError as exc:
                raise ToolInputError(str(exc)) from None
        if self.input_model is not None:
            try:
                return self.input_model.model_validate(args)
            except ValidationError as exc:
                raise ToolInputError(_describe_validation(exc)) from None
        _jsonschema_validate(self.input_schema, args, ToolInputError, validator=self._input_validator())
        return dict(args)

    def _input_validator(self) -> Any:
        """The validator of the current input schema, built once: building it resolves every
        ``$ref`` and costs several times the validation of a typical input."""
        cached = self._input_checker
        if cached is None or cached[0] is not self.input_schema:
            cached = (self.input_schema, _validator_class(self.input_schema)(self.input_schema))
            self._input_checker = cached
        return cached[1]

    async def invoke(self, validated: Any, ctx: ToolContext) -> Any:
        """Run the tool on validated input; a sync tool where :mod:`toolkernel._sync_calls` puts it."""
        if self.calling == "input":
            args: tuple[Any, ...] = (validated, ctx)
            kwargs: dict[str, Any] = {}
        else:
            args = ()
            kwargs = (
                {name: getattr(validated, name) for name in type(validated).__pydantic_fields__}
                if isinstance(validated, BaseModel)
                else dict(validated)
            )
            if self.context_param is not None:
                kwargs[self.context_param] = ctx
        if self._sync_calls is None:
            return await self.fn(*args, **kwargs)
        return await self._sync_calls.run(lambda: self.fn(*args, **kwargs))

    def check_output(self, value: Any) -> tuple[list[Any], Any, dict[str, Any] | None, bool]:
        """Turn a return value into ``(content, structured, meta, is_error)``, enforcing the output schema."""
        if isinstance(value, ToolResult):
            structured = self._structured(value.structured) if value.structured is not None else None
            return [_as_block(b) for b in value.content], structured, value.meta, value.is_error
        if self.output_model is not None or self.output_schema is not None:
            structured = self._structured(value)
            return [text_block(json.dumps(structured, ensure_ascii=False))], structured, None, False
        return _to_content(value), None, None, False

    def _structured(self, value: Any) -> Any:
        if self.output_model is not None:
            try:
                model = (
                    value
                    if isinstance(value, self.output_model)
                    else self.output_model.model_validate(
                        value.model_dump() if isinstance(value, BaseModel) else value
                    )
                )
            except ValidationError as exc:
                raise ToolOutputError(
                    f"tool {self.name!r} returned output that breaks its output schema: "
                    f"{_describe_validation(exc)}"
                ) from None
            return model.model_dump(mode="json", by_alias=True)
        if self.output_schema is not None:
            plain = value.model_dump(mode="json") if isinstance(value, BaseModel) else value
            _jsonschema_validate(self.output_schema, plain, ToolOutputError, f"tool {self.name!r} output")
            return plain
        return value

    def describe(self) -> dict[str, Any]:
        """The tool as listed by ``tools/list`` (wire names)."""
        out: dict[str, Any] = {
            "name": self.name,
            "description": self.description,
            "inputSchema": self.input_schema,
        }
        if self.title:
            out["title"] = self.title
        if self.output_schema is not None:
            out["outputSchema"] = self.output_schema
        if self.annotations is not None:
            out["annotations"] = self.annotations.model_dump(by_alias=True, exclude_none=True)
        if self.task is not None:
            out["execution"] = {"taskSupport": self.task}
        if self.meta:
            out["_meta"] = self.meta
        return out


# ---------------------------------------------------------------------------
# Constructors
# ---------------------------------------------------------------------------


@overload
def tool(fn: Callable[..., Any], /) -> Tool: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    title: str | None = None,
    annotations: ToolAnnotations | Mapping[str, Any] | None = None,
    meta: Mapping[str, Any] | None = None,
    output_schema: type[BaseModel] | Mapping[str, Any] | None = None,
    scopes: Sequence[str] = (),
    task: TaskSupport | None = None,
    task_start: Literal["call", "detach"] = "call",
    on_input_start: ToolCallback | None = None,
    on_input_delta: ToolCallback | None = None,
    on_input_available: ToolCallback | None = None,
    on_output: ToolCallback | None = None,
    blocking: bool | None = None,
) -> Callable[[Callable[..., Any]], Tool]: ...


def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    title: str | None = None,
    annotations: ToolAnnotations | Mapping[str, Any] | None = None,
    meta: Mapping[str, Any] | None = None,
    output_schema: type[BaseModel] | Mapping[str, Any] | None = None,
    scopes: Sequence[str] = (),
    task: TaskSupport | None = None,
    task_start: Literal["call", "detach"] = "call",
    on_input_start: ToolCallback | None = None,
    on_input_delta: ToolCallback | None = None,
    on_input_available: ToolCallback | None = None,
    on_output: ToolCallback | None = None,
    blocking: bool | None = None,
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Make a :class:`Tool` from a function: its parameters are the input schema.

    The description defaults to the docstring; a parameter annotated
    :class:`~toolkernel.ToolContext` receives the context; a return annotation that is
    a pydantic model (or ``output_schema=``) becomes the output schema.

    ``task="optional"`` lets the call run as a task (:mod:`toolkernel.tasks`) when the
    client supports tasks; ``"required"`` refuses clients that do not (-32021). The task
    is created when the call starts, or with ``task_start="detach"`` when the tool calls
    :meth:`ToolContext.run_as_task`, after asking its questions inside the request.

    A sync function runs in a worker thread until its calls show it short and never
    waiting, then on the event loop (:mod:`toolkernel._sync_calls`); ``blocking=True``
    keeps it in threads, ``blocking=False`` puts it on the loop at once.
    """

    def build(func: Callable[..., Any]) -> Tool:
        try:
            hints = get_type_hints(func, include_extras=True)
        except NameError as exc:
            raise ConfigError(
                f"tool {name or func.__name__!r}: cannot resolve the annotation {exc.name!r}; "
                "define the types it uses at module level"
            ) from None
        context_param: str | None = None
        fields: dict[str, Any] = {}
        for pname, param in inspect.signature(func).parameters.items():
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
                raise ConfigError(f"tool {func.__name__!r}: *args/**kwargs parameters cannot be described")
            annotation = hints.get(pname, Any)
            if annotation is ToolContext:
                context_param = pname
                continue
            default = ... if param.default is param.empty else param.default
            fields[pname] = (annotation, default)
        model_name = "".join(part.title() for part in (name or func.__name__).split("_")) + "Input"
        input_model = create_model(model_name, __config__=ConfigDict(extra="forbid"), **fields)
        returns = hints.get("return")
        if _is_content_block_type(returns):
            returns = None  # an image, audio or resource result is content, not structured output
        out_model, out_schema = _output(output_schema if output_schema is not None else returns)
        return Tool(
            name=name or func.__name__,
            description=description if description is not None else inspect.cleandoc(func.__doc__ or ""),
            fn=func,
            input_schema=_schema(input_model),
            input_model=input_model,
            output_schema=out_schema,
            output_model=out_model,
            title=title,
            annotations=_annotations(annotations),
            meta=dict(meta) if meta else None,
            context_param=context_param,
            scopes=_scopes(scopes, name or func.__name__),
            task=task,
            task_start=task_start,
            on_input_start=on_input_start,
            on_input_delta=on_input_delta,
            on_input_available=on_input_available,
            on_output=on_output,
            blocking=blocking,
        )

    return build(fn) if fn is not None else build


def create_tool(
    *,
    id: str,
    description: str,
    execute: Callable[[Any, ToolContext], Awaitable[Any] | Any],
    input_schema: type[BaseModel] | Mapping[str, Any] | None = None,
    output_schema: type[BaseModel] | Mapping[str, Any] | None = None,
    title: str | None = None,
    annotations: ToolAnnotations | Mapping[str, Any] | None = None,
    meta: Mapping[str, Any] | None = None,
    scopes: Sequence[str] = (),
    task: TaskSupport | None = None,
    task_start: Literal["call", "detach"] = "call",
    on_input_start: ToolCallback | None = None,
    on_input_delta: ToolCallback | None = None,
    on_input_available: ToolCallback | None = None,
    on_output: ToolCallback | None = None,
    check_input: Callable[[Mapping[str, Any]], None] | None = None,
    blocking: bool | None = None,
) -> Tool:
    """Make a :class:`Tool` Mastra-style: ``execute(input, ctx)`` with explicit schemas.

    ``input_schema`` is a pydantic model (``execute`` receives an instance) or a JSON
    Schema object (``execute`` receives the validated dict); ``None`` takes no input.
    ``check_input(arguments)`` runs before schema validation (see :attr:`Tool.check_input`);
    ``blocking`` places a sync ``execute`` as in :func:`tool`.
    """
    if not callable(execute):
        raise ConfigError(f"create_tool({id!r}): execute must be callable")
    if not isinstance(description, str) or not description.strip():
        raise ConfigError(f"create_tool({id!r}): description must be a non-empty string")
    model: type[BaseModel] | None
    if input_schema is None:
        model = _no_input_model(id)
        schema = _schema(model)
    elif isinstance(input_schema, type) and issubclass(input_schema, BaseModel):
        model, schema = input_schema, _schema(input_schema)
    elif isinstance(input_schema, Mapping):
        model, schema = (
            None,
            _checked_json_schema(dict(input_schema), f"create_tool({id!r}).input_schema"),
        )
    else:
        raise ConfigError(
            f"create_tool({id!r}): input_schema must be a pydantic model or a JSON Schema object"
        )
    out_model, out_schema = _output(output_schema)
    return Tool(
        name=id,
        description=description,
        fn=execute,
        input_schema=schema,
        input_model=model,
        output_schema=out_schema,
        output_model=out_model,
        title=title,
        annotations=_annotations(annotations),
        meta=dict(meta) if meta else None,
        calling="input",
        scopes=_scopes(scopes, id),
        task=task,
        task_start=task_start,
        on_input_start=on_input_start,
        on_input_delta=on_input_delta,
        on_input_available=on_input_available,
        on_output=on_output,
        check_input=check_input,
        blocking=blocking,
    )


# ---------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------


def _scopes(scopes: Sequence[str], name: str) -> tuple[str, ...]:
    """Scopes as a tuple of non-empty strings without spaces (OAuth scope tokens)."""
    if isinstance(scopes, str):
        scopes = scopes.split()
    out = tuple(scopes)
    for scope in out:
        if not isinstance(scope, str) or not scope or " " in scope:
            raise ConfigError(f"tool {name!r}: scope {scope!r} is not an OAuth scope token")
    return out


def _no_input_model(name: str) -> type[BaseModel]:
    return create_model(f"{name}Input", __config__=ConfigDict(extra="forbid"))


def _schema(model: type[BaseModel]) -> dict[str, Any]:
    schema = model.model_json_schema(by_alias=True)
    schema.pop("title", None)
    schema.setdefault("properties", {})
    return schema


_CONTENT_BLOCKS = frozenset(
    {"TextContent", "ImageContent", "AudioContent", "EmbeddedResource", "ResourceLink"}
)


def _is_content_block_type(annotation: Any) -> bool:
    """``ImageContent``, ``list[ImageContent]`` and the other MCP content block types."""
    if get_origin(annotation) in (list, Sequence):
        annotation = next(iter(get_args(annotation)), None)
    module = getattr(annotation, "__module__", "")
    return module.split(".")[0] == "mcp_types" and getattr(annotation, "__name__", "") in _CONTENT_BLOCKS


def _output(spec: Any) -> tuple[type[BaseModel] | None, dict[str, Any] | None]:
    if isinstance(spec, type) and issubclass(spec, BaseModel):
        return spec, _schema(spec)
    if isinstance(spec, Mapping):
        return None, _checked_json_schema(dict(spec), "output_schema")
    return None, None


def _checked_json_schema(schema: dict[str, Any], where: str) -> dict[str, Any]:
    validator = _validator_class(schema)
    try:
        validator.check_schema(schema)
    except Exception as exc:
        raise ConfigError(f"{where} is not a valid JSON Schema: {getattr(exc, 'message', exc)}") from None
    return schema


def _validator_class(schema: Mapping[str, Any]) -> Any:
    import jsonschema

    return jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)


def _jsonschema_validate(
    schema: Mapping[str, Any], value: Any, error: type[Exception], where: str = "", validator: Any = None
) -> None:
    checker = validator if validator is not None else _validator_class(schema)(schema)
    errors = sorted(checker.iter_errors(value), key=lambda e: list(e.path))
    if errors:
        parts = [f"{'.'.join(str(p) for p in e.path) or '(root)'}: {e.message}" for e in errors]
        raise error((f"{where}: " if where else "") + "; ".join(parts))


def _describe_validation(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors(include_url=False):
        loc = ".".join(str(p) for p in err["loc"]) or "(root)"
        parts.append(f"{loc}: {err['msg']}")
    return "; ".join(parts)


def _annotations(value: ToolAnnotations | Mapping[str, Any] | None) -> ToolAnnotations | None:
    if value is None or isinstance(value, ToolAnnotations):
        return value
    try:
        return ToolAnnotations.model_validate(value)
    except ValidationError as exc:
        raise ConfigError(f"tool annotations: {_describe_validation(exc)}") from None


_text_type: Any = None


def text_block(text: str) -> Any:
    """A ``TextContent`` block; the SDK type is looked up once, on first use."""
    global _text_type
    if _text_type is None:
        from mcp_types import TextContent

        _text_type = TextContent
    return _text_type(type="text", text=text)


def _as_block(block: Any) -> Any:
    if isinstance(block, str):
        return text_block(block)
    if isinstance(block, BaseModel):
        return block
    from mcp_types import ContentBlock
    from pydantic import TypeAdapter

    return TypeAdapter(ContentBlock).validate_python(block)


def _to_content(value: Any) -> list[Any]:
    """Plain return values → MCP content blocks."""
    if value is None:
        return []
    if isinstance(value, str):
        return [text_block(value)]
    from mcp_types import AudioContent, EmbeddedResource, ImageContent, ResourceLink, TextContent

    blocks = (TextContent, ImageContent, AudioContent, EmbeddedResource, ResourceLink)
    if isinstance(value, blocks):
        return [value]
    if isinstance(value, list) and value and all(isinstance(v, blocks) for v in value):
        return list(value)
    if isinstance(value, BaseModel):
        return [text_block(value.model_dump_json(by_alias=True))]
    return [text_block(json.dumps(value, ensure_ascii=False, default=str))]
