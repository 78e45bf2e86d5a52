"""One module per CLI subcommand: each defines `register(parser)` and `run(args) -> int`."""
