"""Prompt sources: each kind of context a chat prompt holds (core.sources.base), registered in
core.sources.registry."""
