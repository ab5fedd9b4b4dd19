"""Agents: adapters that run a coding agent on a workspace and return its transcript and usage."""
