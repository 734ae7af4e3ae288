"""An auth provider that accepts a fixed list of API keys, read from its settings."""

from pydantic import BaseModel

from toolkernel import AuthInfo, hookimpl


class ApiKeySettings(BaseModel):
    keys: dict[str, str] = {}  # token -> the subject it identifies


class ApiKeyProvider:
    def __init__(self, settings: ApiKeySettings):  # built by the kernel with validated settings
        self.keys = settings.keys

    async def verify(self, token):
        subject = self.keys.get(token)
        if subject is None:
            return None  # not a valid token
        return AuthInfo(subject=subject, client_id="api-key", scopes=("tools",))


@hookimpl
def register_settings(registry):
    registry.add("api-keys", ApiKeySettings)


@hookimpl
def register_auth_providers(registry):
    registry.add("api-keys", ApiKeyProvider, settings="api-keys")
