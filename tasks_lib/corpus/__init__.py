"""The corpus stage: build from git objects, redact, certify, and the task corpus with its invariants."""
