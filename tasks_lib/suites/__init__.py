"""The memory suites: the recall sweep, the offline retrieval suite and the public-data suites."""
