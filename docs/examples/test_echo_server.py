import pytest
from echo_server import app

from toolkernel.testing import connect_in_memory


@pytest.mark.anyio
async def test_echo(kernel):
    async with connect_in_memory(app, kernel=kernel) as client:
        result = await client.call_tool("echo", {"text": "hi"})
    assert result.content[0].text == "hi"
