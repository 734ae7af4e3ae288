"""Tools from plain functions: the signature is the input schema, the docstring the description."""

from typing import Annotated, Literal

from pydantic import BaseModel, Field

from toolkernel import MCPServer, tool


@tool
def add(a: int, b: int = 0) -> int:
    """Add two integers."""
    return a + b


class Forecast(BaseModel):
    city: str
    celsius: float
    sky: Literal["clear", "cloudy", "rain"]


@tool(
    title="Weather forecast",
    annotations={"readOnlyHint": True, "openWorldHint": True},
    meta={"example.com/cost": "free"},
)
async def forecast(
    city: Annotated[str, Field(description="City name, e.g. Lisbon", min_length=1)],
    days: Annotated[int, Field(ge=1, le=7)] = 1,
) -> Forecast:
    """Tomorrow's weather for a city."""
    return Forecast(city=city, celsius=21.5, sky="clear")


app = MCPServer("weather", "1.0.0", tools=[add, forecast])
