"""Margin: an AI language server that spends the model's context window like money."""

__version__ = "0.1.0"
