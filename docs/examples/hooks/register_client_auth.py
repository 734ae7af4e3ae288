"""A client auth type: every request to the server carries an API key header from the config."""

import httpx2

from toolkernel import hookimpl


class ApiKeyAuth(httpx2.Auth):
    def __init__(self, key):
        self.key = key

    def auth_flow(self, request):
        request.headers["X-API-Key"] = self.key
        yield request


def api_key_auth(url, settings):
    if "key" not in settings:
        raise ValueError("auth type api-key needs `key`")
    return ApiKeyAuth(settings["key"])


@hookimpl
def register_client_auth(registry):
    registry.add("api-key", api_key_auth)
