"""`memtrial validate`: check manifests and receipts against their contracts, every wrong field named."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from flows.cli.common import JsonFlag, emit_json, out
from tasks_lib.errors import ContractError, MemtrialError


def validate(
    paths: Annotated[list[Path], typer.Argument(help="Manifests or receipts to validate (kind from the file name).")],
    kind: Annotated[str | None, typer.Option(help="Validate every file as this kind, e.g. task.json.")] = None,
    as_json: JsonFlag = False,
) -> None:
    """Validate manifests and receipts against their contracts; report every wrong field."""
    from tasks_lib.contracts import DOCUMENT_KINDS, load_document

    model = None
    if kind is not None:
        model = DOCUMENT_KINDS.get(kind)
        if model is None:
            raise MemtrialError(f"--kind {kind!r} is unknown; known kinds: {', '.join(sorted(DOCUMENT_KINDS))}")
    results: list[dict[str, Any]] = []
    for path in paths:
        try:
            load_document(path, model)
            results.append({"path": str(path), "valid": True, "errors": []})
        except ContractError as error:
            results.append({"path": str(path), "valid": False, "errors": [str(v) for v in error.violations]})
    if as_json:
        emit_json(results)
    else:
        for result in results:
            if result["valid"]:
                out.print(f"ok      {result['path']}")
            for line in result["errors"]:
                out.print(f"invalid {line}")
    if not all(r["valid"] for r in results):
        raise typer.Exit(1)
