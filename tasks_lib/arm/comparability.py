"""The comparability key: when two records measure the same question.

A score only moves for a reason worth reading when everything that defines the question stayed the
same. The key of a record is its challenge (task id), fixture (corpus id of the built tree), model
(agent adapter and model name), manifest digest, verifier digest, source commit and memory config
digest; a comparison adds the pair of conditions it compares. The build under test is deliberately
not in the key: it is the thing whose effect a trend should show, so it is recorded per data point
instead. The memory system's *configuration* is in it: which system, which embedder, which
provisioner command and which frozen adapter config (the third-party packages' versions and the
adapter's settings, `tasks_lib.memory.adapter_config`), so `chroma` and `chroma+memtrial-keyword`,
or one system before and after a settings change or a package upgrade, never share a line.

Digests, precisely:

- `manifest_digest`: sha256 of the task manifest (`task.json` as validated) dumped as canonical
  JSON (keys sorted, no whitespace, UTF-8). It covers the prompts, limits, allowed paths, planted
  memories and the verifier's pinned asset digest.
- `verifier_digest`: sha256 of canonical JSON of `{"check_command", "verifier": {runtime, asset
  sha256, timeout}, "hidden": [[path, sha256], ...]}`, the hidden test files listed by relative
  POSIX path in sorted order. It changes when anything that decides pass/fail changes.
- `prompts_digest`: sha256 of canonical JSON of the list `[instruction, *follow_up_prompts]`.
- `memory_config_digest`: `tasks_lib.run.provenance.memory_config_digest` of the arm's memory system (the
  run provenance carries the same value): sha256 of canonical JSON of the memory system kind, the
  embedder, the provisioner command and the adapter config's digest. None on a record of an arm that
  reaches no memory system (`off`, `ablate:all`, `notes`, `grep`: `NO_MEMORY_SYSTEM`), whose
  key then takes the config of its run's arms with memory; an arm with memory whose record lacks it
  (made before memtrial recorded it) is incomparable (MissingKeyError), like any other missing field.
- `source_commit`: the last commit of the checkout the task was loaded from that changed the
  task's folder (`git -C <task folder> rev-list -1 HEAD -- .`), so an unrelated commit elsewhere in
  the repository does not split a trend. The fixture tree itself is pinned by `fixture` (its corpus
  id), and uncommitted edits to the task's manifest or tests by the two digests above.

The model is `<agent>/<model>`, from the model the agent's run reports (`AgentRun.model`: the
claude-code and openai-chat adapters' model, a command agent's `model` option), or the agent alone
when it runs no named model (the calibration agent).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from tasks_lib.conditions import NO_MEMORY_SYSTEM
from tasks_lib.contracts import (
    Condition,
    ContractModel,
    GitOid,
    Identifier,
    NonEmptyText,
    RunRecord,
    Sha256,
    TaskManifest,
)
from tasks_lib.corpus.tasks import LoadedTask
from tasks_lib.errors import MemtrialError
from tasks_lib.trees import sha256_bytes, sha256_file, walk_files

RECORD_KEY_FIELDS = ("challenge", "fixture", "model", "manifest_digest", "verifier_digest", "source_commit", "memory_config_digest")
"""Key fields every record carries (a comparison adds `conditions`)."""


class IncomparableError(MemtrialError):
    """Records with different comparability keys were asked to share one line or view."""


class MissingKeyError(MemtrialError):
    """A record lacks a comparability field (it was made before memtrial recorded it)."""


class ComparabilityKey(ContractModel):
    """What must be equal for two data points to be on one line."""

    challenge: Identifier
    """The task id."""
    fixture: Sha256
    """Corpus id of the fixture tree the workspace was built from."""
    model: NonEmptyText
    """Agent adapter and model name (`<agent>/<model>`)."""
    conditions: tuple[Condition, ...]
    """The conditions compared, sorted (e.g. `("off", "on")`); empty for a single record's key."""
    manifest_digest: Sha256
    """sha256 of the task manifest as canonical JSON."""
    verifier_digest: Sha256
    """sha256 of the check command, the verifier and the hidden tests."""
    source_commit: GitOid
    """Last commit that changed the task's sources."""
    memory_config_digest: Sha256 | None = None
    """The memory system's configuration (system, embedder, provisioner command, adapter config); None
    only when no compared arm reaches a memory system."""


def canonical_json(value: Any) -> bytes:
    """Canonical JSON bytes: sorted keys, no whitespace, UTF-8."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def digest_of(value: Any) -> str:
    """sha256 of `value` as canonical JSON."""
    return hashlib.sha256(canonical_json(value)).hexdigest()


def manifest_digest(manifest: TaskManifest) -> str:
    """sha256 of the validated task manifest as canonical JSON."""
    return digest_of(manifest.model_dump(mode="json"))


def prompts_digest(manifest: TaskManifest) -> str:
    """sha256 of the visible prompt and follow-up prompts, in order."""
    return digest_of([manifest.instruction, *manifest.follow_up_prompts])


def _entry_digest(path: Path) -> str:
    """sha256 of a file's bytes, or of a symlink's target text (the link is applied as a link)."""
    return sha256_bytes(os.readlink(path).encode()) if path.is_symlink() else sha256_file(path)


def verifier_digest(manifest: TaskManifest, hidden_dir: Path) -> str:
    """sha256 of the check command, the pinned verifier and every file under `hidden_dir`, exactly
    the files `taskcorpus.overlay` applies (symlinks by their target).

    A missing hidden folder is an error: a verifier digest that silently covers no tests would
    let a changed test suite look unchanged.
    """
    if not hidden_dir.is_dir():
        raise MissingKeyError(f"{hidden_dir}: hidden tests folder does not exist; the verifier digest covers it")
    hidden = [(rel, _entry_digest(hidden_dir / rel)) for rel in walk_files(hidden_dir)]
    verifier = manifest.verifier
    return digest_of({
        "check_command": list(manifest.check_command),
        "verifier": {"runtime": verifier.runtime, "sha256": verifier.asset.sha256, "timeout_seconds": verifier.timeout_seconds},
        "hidden": [list(item) for item in hidden],
    })


def source_commit_of(task_root: Path) -> str | None:
    """The last commit of `task_root`'s checkout that changed it; None outside git or when uncommitted."""
    out = subprocess.run(
        ["git", "-C", str(task_root), "rev-list", "-1", "HEAD", "--", "."], capture_output=True, text=True, check=False
    )
    found = out.stdout.strip()
    return found if out.returncode == 0 and len(found) in (40, 64) else None


def record_fields(task: LoadedTask, agent_name: str, model: str | None = None, source_root: Path | None = None) -> dict[str, str | None]:
    """The comparability and preregistration fields of a RunRecord for `task` run by `agent_name`
    (`source_root`: the task's folder in its checkout, when `task.root` is a pinned copy).

    Never raises for a task it cannot pin: a field it cannot compute is None, which makes the
    record incomparable and inadmissible (fail closed) instead of failing the paid attempt.
    """
    try:
        verifier = verifier_digest(task.manifest, task.hidden_dir)
    except MissingKeyError:
        verifier = None
    return {
        "model": model_label(agent_name, model),
        "manifest_digest": manifest_digest(task.manifest),
        "verifier_digest": verifier,
        "prompts_digest": prompts_digest(task.manifest),
        "source_commit": source_commit_of(source_root or task.root),
    }


def model_label(agent_name: str, model: str | None) -> str:
    """`<agent>/<model>`, or the agent name alone when it runs no named model."""
    return f"{agent_name}/{model}" if model else agent_name


def arm_memory_config_digest(condition: str, embedder: str, provisioner_argv: Sequence[str] = (),
                             provisioner_env: Mapping[str, str] | None = None) -> str | None:
    """A record's `memory_config_digest`: None under a condition that reaches no memory system, else the
    digest of the embedded store with `embedder` or of the provisioner `provisioner_argv` (`provisioner_env`)."""
    from tasks_lib.run.provenance import arm_memory_config

    return None if condition in NO_MEMORY_SYSTEM else arm_memory_config(embedder, provisioner_argv, provisioner_env)[0]


def record_key(record: RunRecord) -> ComparabilityKey:
    """The key of one record (no conditions). Raises MissingKeyError naming the missing fields."""
    values = {
        "fixture": record.corpus_id,
        "model": record.model,
        "manifest_digest": record.manifest_digest,
        "verifier_digest": record.verifier_digest,
        "source_commit": record.source_commit,
    }
    missing = sorted(name for name, value in values.items() if value is None)
    if record.memory_config_digest is None and record.condition not in NO_MEMORY_SYSTEM:
        missing = sorted([*missing, "memory_config_digest"])
    if missing:
        raise MissingKeyError(
            f"record {record.run_id}/{record.task_id}/{record.condition}/t{record.trial} has no {', '.join(missing)}: "
            "it was made before memtrial recorded comparability fields and cannot be compared; re-run it"
        )
    return ComparabilityKey(challenge=record.task_id, conditions=(), memory_config_digest=record.memory_config_digest,
                            **values)  # type: ignore[arg-type]


def key_differences(a: ComparabilityKey, b: ComparabilityKey) -> list[str]:
    """One `field: A != B` line per differing key field."""
    lines = []
    for name in ("challenge", *RECORD_KEY_FIELDS[1:], "conditions"):
        left, right = getattr(a, name), getattr(b, name)
        if left != right:
            show = (lambda v: ",".join(v)) if name == "conditions" else (lambda v: "none" if v is None else str(v))
            lines.append(f"{name}: {show(left)!s} != {show(right)!s}")
    return lines


def require_same_key(keys: Iterable[tuple[str, ComparabilityKey]]) -> ComparabilityKey:
    """The one key shared by every labelled key; IncomparableError naming fields and both values otherwise."""
    first: tuple[str, ComparabilityKey] | None = None
    for label, key in keys:
        if first is None:
            first = (label, key)
            continue
        differences = key_differences(first[1], key)
        if differences:
            raise IncomparableError(
                f"{first[0]} and {label} have different comparability keys and cannot share one view: "
                + "; ".join(differences)
            )
    if first is None:
        raise IncomparableError("no records to compare")
    return first[1]


def comparison_key(records: Sequence[RunRecord], label: str) -> ComparabilityKey:
    """The key of one task's records in one run: every record must share it; conditions are the set present.
    A record of an arm without memory takes the memory config of the first record with one (its arm
    measured no memory system; the pair it belongs to is defined by the other arm's)."""
    keyed = [(f"{label} {r.task_id}/{r.condition}/t{r.trial}", record_key(r)) for r in records]
    config = next((k.memory_config_digest for _, k in keyed if k.memory_config_digest is not None), None)
    shared = require_same_key([(name, k if k.memory_config_digest is not None else k.model_copy(update={"memory_config_digest": config}))
                               for name, k in keyed])
    return shared.model_copy(update={"conditions": tuple(sorted({r.condition for r in records}))})
