"""Analysis of stored runs: grading, aggregation, statistics, admission, preregistration, comparison, publication, trend."""
