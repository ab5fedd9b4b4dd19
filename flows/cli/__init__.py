"""The `memtrial` command line: `main` and one module per command group."""
