"""Delivering memory to an agent: the prompt hook, the store server it may talk to (its protocol and client), and the provenance marker."""
