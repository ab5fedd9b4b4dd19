"""The CLI options more than one command takes, each defined once (with its environment variable).

A command declares `artifacts: ArtifactRootOpt = None`, never its own `typer.Option("--artifacts")`,
so every command says the same thing about the same flag; tests/test_cli_options.py fails when two
commands give one flag two help texts that are not declared as different meanings there.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from flows.cli.common import EMBEDDER_CHOICES
from tasks_lib.settings import ARTIFACT_ROOT


def _command_line_only(ctx: typer.Context, param: typer.CallbackParam, value: str | None) -> str | None:
    """The value given on the command line; None when it came from the environment, which the command
    then reads through `tasks_lib.settings` after the run config's own root, as every reader does, and
    names as the environment (not as `--artifacts`) when it refuses it."""
    source = ctx.get_parameter_source(param.name) if param.name else None
    if source is not None and source.name == "ENVIRONMENT":
        return None
    return value


ArtifactRootOpt = Annotated[str | None, typer.Option(
    "--artifacts", "--artifact-root", envvar=ARTIFACT_ROOT.name, callback=_command_line_only,
    help="Artifact root: a folder or s3://bucket/prefix (default: the run config's artifact_root where the command "
         "reads a config, else the environment variable, else .memtrial/artifacts under $MEMTRIAL_HOME).")]
TrendRootOpt = Annotated[str | None, typer.Option(
    "--artifacts", help="Artifact root (a folder or s3://bucket/prefix) to append a trend snapshot to; none without it.")]
CurveOpt = Annotated[str | None, typer.Option(
    "--curve", help="Trend curve to append to (default: the suite's name; retrieval-MEMORY-EMBEDDER for another "
                    "memory system or embedder than reference with hashed).")]
PlainOpt = Annotated[bool, typer.Option("--plain", help="Plain progress lines instead of the live progress bar.")]

EmbedderOpt = Annotated[str, typer.Option(
    "--embedder", help=f"Embedder of the memory systems that use memtrial's: {EMBEDDER_CHOICES}.")]
MemoryOpt = Annotated[str, typer.Option(
    "--memory", help="Memory system: a registry name (reference, chroma, lancedb, sqlite-vec, qdrant, txtai, mem0, mcp-memory) or a named "
                     "variant (e.g. chroma+memtrial-keyword); `suite recall` also takes reference-first-heard (never "
                     "resolves corrections) and none (retention policy alone).")]
LimitOpt = Annotated[int | None, typer.Option(
    "--limit", min=1, help="Score only the first N evaluation groups (conversations / records) of LoCoMo and LongMemEval.")]
LengthsOpt = Annotated[str, typer.Option(
    "--lengths", help="Comma-separated burial lengths (filler turns) of the recall sweep.")]
BudgetOpt = Annotated[Path | None, typer.Option(
    "--budget", help="Budget guard config, checked before the first paid request; required for any agent but calibration "
                     "and for a --base-url not on 127.0.0.1.")]

_REVISION = typer.Option(
    "--revision", help="Commit of the checkout whose git objects the tasks are built from (default HEAD; `task` commands: "
                       "a snapshot of the working tree).")
RevisionOpt = Annotated[str, _REVISION]
WorkingTreeRevisionOpt = Annotated[str | None, _REVISION]
TasksRootOpt = Annotated[Path | None, typer.Option(
    "--tasks-root", help="Task corpus folder inside a git checkout (default: the bundled corpora/tasks).")]

_TASKS = typer.Option("--tasks", help="Comma-separated task ids of the bundled corpus (paired: default every task).")
TasksOpt = Annotated[str, _TASKS]
OptionalTasksOpt = Annotated[str | None, _TASKS]
_AGENT = typer.Option("--agent", help="Agent adapter: calibration, claude-code, openai-chat or command.")
AgentOpt = Annotated[str, _AGENT]
ConditionsOpt = Annotated[str, typer.Option(
    "--conditions", help="Comma-separated conditions: off, on, notes, placebo, harm:absent, harm:superseded, "
                         "harm:contradictory, harm:adjacent, feed, grep, ablate:<lane>, ablate:all (docs/ARMS.md, docs/FEED.md).")]
TrialsOpt = Annotated[int, typer.Option("--trials", help="Trials per task and condition.")]
