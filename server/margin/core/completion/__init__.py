"""Inline completion: the pure parts."""
