"""A run's home: its config (`config`: `RunConfig` and the typed options), the checks before money
is spent (`preflight`), the layout of `runs/<run_id>/` (`layout`), the one reader of its records
(`records`), the seal (`seal`), the status marker (`status`), what produced it (`provenance`) and
the run index behind `memtrial runs` and `memtrial show` (`index`). Every stage, command and report
reads a run through these modules."""
