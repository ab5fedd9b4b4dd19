"""A run's home: the layout of `runs/<run_id>/` (`layout`) and the one reader of its records (`records`)."""
