"""Test doubles that behave like the real thing (used by the tests and the benchmarks)."""
