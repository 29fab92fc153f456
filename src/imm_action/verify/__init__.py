"""Descriptor execution: deterministic, sandboxed, cached by (tree, descriptor)."""
