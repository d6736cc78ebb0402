"""The services one Margin process runs with, shared by the language server and the terminal."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from margin.core.settings import SettingsState
from margin.core.vfs import VirtualFileStore
from margin.services.backends import Backends, ProviderFactory


@dataclass
class MarginApp:
    settings: SettingsState
    backends: Backends
    files: VirtualFileStore = field(default_factory=VirtualFileStore)

    @classmethod
    def create(cls, make_provider: ProviderFactory, environ: Mapping[str, str]) -> MarginApp:
        return cls(settings=SettingsState(environ), backends=Backends(make_provider, environ))

    async def aclose(self) -> None:
        await self.backends.aclose()
