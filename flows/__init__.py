"""memtrial's orchestration: Prefect flows over `tasks_lib` (paired arms with their preparation,
suites, nightly) and the shared stage wrappers beside them (`stages`, `budget`, `report_artifacts`,
`runners`); the runtime they run in (`flows.runtime`); and the `memtrial` CLI (`flows.cli`)."""
