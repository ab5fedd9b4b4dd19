"""One default embedder for every command that embeds: the nightly default's, from one definition,
stated in each command's help (issue #31 item 7). The suites used to default to `hashed` while the
nightly ran MiniLM, so `memtrial suite recall --sweep` scored 0 on paraphrased probes for every system."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from flows.cli.common import DEFAULT_EMBEDDER
from flows.cli.main import app
from tasks_lib.run.config import load_run_config

ROOT = Path(__file__).resolve().parents[1]

EMBEDDING_COMMANDS = {"paired", "suite recall", "suite retrieval", "suite compare", "suite locomo", "suite longmemeval"}
"""Commands with an --embedder option (a new one must join this set and the same default)."""


def embedder_options() -> dict[str, Any]:
    """Every command's --embedder option (a click option of typer's command tree), by command path."""
    found: dict[str, Any] = {}

    def walk(command: Any, path: str) -> None:
        for param in command.params:
            if "--embedder" in param.opts:
                found[path] = param
        for name, sub in getattr(command, "commands", {}).items():
            walk(sub, f"{path} {name}".strip())

    walk(typer.main.get_command(app), "")
    return found


def test_the_default_embedder_is_the_nightly_defaults() -> None:
    assert load_run_config(ROOT / "configs" / "default.yaml").embedder == DEFAULT_EMBEDDER


def test_every_command_that_embeds_defaults_to_the_nightlys_embedder_and_says_so() -> None:
    options = embedder_options()
    assert set(options) == EMBEDDING_COMMANDS
    for path, option in options.items():
        assert option.default == DEFAULT_EMBEDDER, f"memtrial {path} --embedder defaults to {option.default!r}"
        assert f"{DEFAULT_EMBEDDER} (default" in (option.help or ""), f"memtrial {path} --embedder help: {option.help!r}"
