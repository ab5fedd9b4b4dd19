"""Every environment variable the agent side reads, or the runner exports to the agent and its hooks.

This is the one place these names are spelled: each constant below is one line, and every consumer
(the hook, the switches, the memory server, the provisioners, the agents, the arms) imports it from
here, so renaming a variable is a one-line change (tests/test_memory_env.py fails when code spells a
name again). The names are neutral on purpose: an agent must not learn from its environment that it
is measured, by what, or in which arm, so no name says memtrial, a condition, `off` or an ablation,
and every arm gets the same names except the store variable, which only an arm with memory has.
Settings only the runner reads (MEMTRIAL_HOME, MEMTRIAL_ARTIFACT_ROOT, the provisioner's state
folder, ...) are `tasks_lib.settings`: the agent never sees them.

Importing this module costs nothing: the hook reads it on every prompt, before anything else.
"""

from __future__ import annotations

# --------------------------------------------------------------------------- memory delivery (hook and agent)

REALM_ENV = "MEMORY_REALM"
"""The trial's realm, used verbatim (validated, never defaulted)."""
SOCKET_ENV = "MEMORY_SOCKET"
"""Socket of the run's served replica; when set it is used instead of STORE_ENV."""
STORE_ENV = "MEMORY_DB"
"""Path of the run's private store replica file."""
HISTORY_ENV = "PROJECT_HISTORY_DIR"
"""A read-only folder of recorded sessions of earlier work on the project (only the `grep` arm has it)."""
SESSION_QUERY_ENV = "MEMORY_SESSION_QUERY"
"""Query for the session-start briefing; unset means no session-start delivery."""

# --------------------------------------------------------------------------- switches (see `switches`)
# Adapter-level switches for the conformance suite and a hand-run hook. The runner never sets them on
# an agent: `off` and `ablate:all` arms get no store at all, and an `ablate:<lane>` arm gets a replica
# without that lane's data (see `tasks_lib.memory.reference.replica.strip_lanes`).

MEMORY_OFF_ENV = "MEMORY_DISABLED"
"""Kill switch: `1` means zero injection; `0` or unset means memory is on."""
ABLATE_LANES_ENV = "MEMORY_SKIP_LANES"
"""Lanes to skip: comma-separated lane names, or `all`; unset or empty skips none."""

# --------------------------------------------------------------------------- the command agent's protocol (see `agents.command`)

WORKSPACE_ENV = "AGENT_WORKSPACE"
"""The workspace as the command sees it."""
HOOK_ARGV_ENV = "AGENT_HOOK_ARGV"
"""The memory hook's argv, as a JSON list."""
PROMPT_INDEX_ENV = "AGENT_PROMPT_INDEX"
"""0-based index of the prompt being run."""
PROMPT_COUNT_ENV = "AGENT_PROMPT_COUNT"
"""Number of prompts in the session."""
SESSION_ID_ENV = "AGENT_SESSION_ID"
"""Id of the session, the same for every prompt of it."""
TRANSCRIPT_ENV = "AGENT_TRANSCRIPT"
"""A read-only JSON-lines file of the transcript steps so far."""
MODEL_ENV = "AGENT_MODEL"
"""The configured model, when there is one."""

# --------------------------------------------------------------------------- groups

SWITCHES = (MEMORY_OFF_ENV, ABLATE_LANES_ENV)
"""Switches a memory server drops from its environment and a provisioner may not export (the runner
never sets them on an agent either)."""
STORE_PATHS = (STORE_ENV, SOCKET_ENV)
"""Variables naming a path the hook opens (the replica file, the socket)."""
AGENT_ENV = (
    REALM_ENV, SOCKET_ENV, STORE_ENV, HISTORY_ENV, SESSION_QUERY_ENV, *SWITCHES,
    WORKSPACE_ENV, HOOK_ARGV_ENV, PROMPT_INDEX_ENV, PROMPT_COUNT_ENV, SESSION_ID_ENV, TRANSCRIPT_ENV, MODEL_ENV,
)
"""Every name above."""
