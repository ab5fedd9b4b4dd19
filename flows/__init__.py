"""memtrial's orchestration: Prefect flows over `tasks_lib` (prepare, paired arms, suites, nightly) and the `memtrial` CLI."""
