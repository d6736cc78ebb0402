"""The services one Margin process runs with, shared by the language server and the terminal."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from margin.core.settings import SettingsState
from margin.core.vfs import VirtualFileStore
from margin.core.tokens.choice import choose_tokenizer
from margin.services.backends import Backends, ProviderFactory
from margin.services.tokenizers import LlamaCounterFactory, Tokenizers


@dataclass
class MarginApp:
    settings: SettingsState
    backends: Backends
    tokenizers: Tokenizers
    files: VirtualFileStore = field(default_factory=VirtualFileStore)

    @classmethod
    def create(
        cls,
        make_provider: ProviderFactory,
        make_llama_counter: LlamaCounterFactory,
        environ: Mapping[str, str],
    ) -> MarginApp:
        return cls(
            settings=SettingsState(environ),
            backends=Backends(make_provider, environ),
            tokenizers=Tokenizers(make_llama_counter),
        )

    def preload_tokenizers(self) -> None:
        """Start building the in-process tokenizers the enabled profiles name (by setting or by
        model family; the llama.cpp tokenizer is the server's and needs no building)."""
        profiles = [p for p in self.settings.current.profiles.values() if p.enabled]
        self.tokenizers.preload(choose_tokenizer(p.tokenizer, p.model, None) for p in profiles)

    async def aclose(self) -> None:
        await self.backends.aclose()
        await self.tokenizers.aclose()
