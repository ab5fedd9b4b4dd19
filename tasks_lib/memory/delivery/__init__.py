"""Delivering memory to an agent: the prompt hook, the store server it may talk to, and the provenance marker."""
