"""One module per CLI command, each `run(args, io) -> int`."""
