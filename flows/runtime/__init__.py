"""The runtime a flow runs in, below the flows and their stage wrappers: `settings` (the environment
and Prefect's settings), `localserver` (the Prefect API of a command), `dask_runner` (the watched Dask
task runner), `progress`, `status` (the run's status marker around a flow), `secrets`, `history`
(pruning Prefect's database), `interrupt` (Ctrl-C and SIGTERM) and `cache` (the index of stored stage
results). Nothing here imports a flow or a stage wrapper."""
