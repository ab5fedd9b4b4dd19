"""The write-path suite as a Prefect flow: each step of each sequence is a cached task.

A step's cache key is its task's content digest, the arm, its position, the agent, the embedder,
the commit, the step code and the SHA-256 of the memory store the previous step left, and the
store after the step is stored as an artifact (`runs/<run_id>/write-path/<sequence>/<arm>/<position>.sqlite`).
Before any step, the sequence's tasks pass the task corpus invariants (the cached `corpus-invariants`
stage), or none runs. So a rerun after a late failure re-uses every completed step (and its store) and runs only the
rest; a changed earlier step changes every later key. The suite's result (every sequence's
`WritePathResult`) is stored as `runs/<run_id>/suites/write-path.json`.

Options (`suite_options.write-path`, a `tasks_lib.suites.options.WritePathOptions`): `sequences`
(folder names under `corpora/sequences`, default all of them) and `agent` (default `calibration`, offline).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from flows.runtime.settings import configure_prefect

configure_prefect()

from prefect import flow, task
from prefect.cache_policies import TASK_SOURCE, CacheKeyFnPolicy
from prefect.context import TaskRunContext

from flows import stages
from flows.runtime.progress import reporter
from flows.runtime.settings import PROJECT_ROOT
from flows.stages import folder_digest, suite_stage
from tasks_lib.arm.steps import ArmSetup, TaskSource
from tasks_lib.artifacts import run_key, suite_key
from tasks_lib.contracts import ContractModel
from tasks_lib.corpus.build import resolve_commit
from tasks_lib.corpus.packs import publish_corpus_pack
from tasks_lib.corpus.tasks import committed_folders, load_task, uncommitted_folders
from tasks_lib.memory.realms import ensure_run_secret
from tasks_lib.run.config import RunConfig
from tasks_lib.suites.options import SEQUENCES_ROOT, WritePathOptions, bundled_sequences
from tasks_lib.suites.writepath import (
    ARMS,
    WritePathArm,
    WritePathError,
    WritePathResult,
    WritePathStep,
    load_sequence,
    run_step,
    summarize,
)
from tasks_lib.trees import sha256_bytes

SUITE = "write-path"
STEP_CODE = ("tasks_lib.suites.writepath", "tasks_lib.arm", "tasks_lib.agents", *stages.MEMORY_CODE)


class StepSpec(ContractModel):
    """One step of the write-path suite as a stage input."""

    run_id: str
    sequence_id: str
    task_folder: str
    """Absolute path of the task folder (not part of the key; `task_digest` is)."""
    task_digest: str
    """Digest of every file of the task folder."""
    arm: WritePathArm
    position: int
    agent: str
    embedder: str
    sandbox: str
    repo_root: str
    commit: str
    tasks_subdir: str
    artifact_root: str
    code: str
    """Digest of the step's code."""


class StepArtifact(ContractModel):
    """What a step leaves: its record and the store after it (an artifact key and its digest)."""

    step: WritePathStep
    store_key: str | None = None
    store_sha256: str | None = None


def _step_key(_ctx: TaskRunContext, inputs: dict[str, Any]) -> str:
    spec: StepSpec = inputs["spec"]
    identity = spec.model_dump(exclude={"task_folder", "repo_root", "artifact_root"})
    identity["previous"] = inputs.get("previous_sha256")
    return "write-path-" + hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()


@task(name="write-path-step", cache_policy=CacheKeyFnPolicy(cache_key_fn=_step_key) + TASK_SOURCE, persist_result=True, retries=0)
def write_path_step(spec: StepSpec, previous_key: str | None, previous_sha256: str | None) -> StepArtifact:
    """Run one task of one arm on the store the previous step left (`tasks_lib.suites.writepath.run_step`)."""
    stages.enter_stage(f"write-path-step:{spec.arm}:{spec.position}", spec.sequence_id)
    store = stages.artifact_store(spec.artifact_root)
    previous = store.get_bytes(previous_key) if previous_key else None
    if previous is not None and sha256_bytes(previous) != previous_sha256:
        raise WritePathError(f"{previous_key}: the stored memory changed since its step ran; rerun the suite under a new run id")
    setup = ArmSetup(run_id=f"{spec.run_id}-{SUITE}", source=TaskSource(Path(spec.repo_root), spec.commit, spec.tasks_subdir),
                     agent_name=spec.agent, store=store, embedder=spec.embedder, sandbox=spec.sandbox)
    outcome = run_step(spec.sequence_id, load_task(Path(spec.task_folder)), spec.arm, spec.position, setup, previous)
    if outcome.store is None:
        return StepArtifact(step=outcome.step)
    key = run_key(spec.run_id, SUITE, spec.sequence_id, spec.arm, f"{spec.position}.sqlite")
    store.put_bytes(key, outcome.store)
    return StepArtifact(step=outcome.step, store_key=key, store_sha256=sha256_bytes(outcome.store))


def sequence_folders(options: WritePathOptions) -> list[Path]:
    """The sequences the options name (all bundled ones by default); WritePathError for an unknown name
    (preflight refuses it before the run; this holds for a caller that skipped it)."""
    known = bundled_sequences(PROJECT_ROOT)
    names = options.sequences or known
    missing = [n for n in names if n not in known]
    if missing or not names:
        raise WritePathError(f"suite_options.{SUITE}.sequences: unknown {', '.join(missing) or '(none named)'}; "
                             f"known: {', '.join(known) or 'none'} (under {SEQUENCES_ROOT})")
    return [PROJECT_ROOT / SEQUENCES_ROOT / n for n in names]


def run_write_path(config: RunConfig, run_id: str, artifact_root: str) -> list[WritePathResult]:
    """Every named sequence, every arm, in order, each step a cached task; returns the results."""
    options = config.suite_options.write_path
    folders = sequence_folders(options)
    agent = options.agent
    commit = resolve_commit(PROJECT_ROOT, config.revision, str(PROJECT_ROOT))
    storage = stages.result_storage(artifact_root, config.result_root)
    step = write_path_step.with_options(result_storage=storage)
    code = stages.code_digest(*STEP_CODE)
    ensure_run_secret(stages.artifact_store(artifact_root), f"{run_id}-{SUITE}")  # before any step: all steps read this one
    results = []
    invariants = stages.check_invariants.with_options(result_storage=storage)
    for folder in folders:
        manifest, tasks = load_sequence(folder)
        subdir = f"{SEQUENCES_ROOT}/{folder.name}"
        pack = publish_corpus_pack(stages.artifact_store(artifact_root), PROJECT_ROOT, commit, subdir)
        report = invariants(pack, artifact_root, None, stages.code_digest(*stages.INVARIANTS_CODE))
        failures = [*uncommitted_folders(folder, committed_folders(PROJECT_ROOT, commit, subdir)), *report.failures]
        if failures or not report.ok:
            raise WritePathError(f"sequence {manifest.sequence_id}: its tasks break the corpus invariants, so none runs: "
                                 + "; ".join([str(f) for f in failures] or ["no task was checked"]))
        steps = []
        for arm in ARMS:
            previous: StepArtifact | None = None
            for position, task_ in enumerate(tasks):
                spec = StepSpec(run_id=run_id, sequence_id=manifest.sequence_id, task_folder=str(task_.root),
                                task_digest=folder_digest(task_.root), arm=arm, position=position, agent=agent,
                                embedder=config.embedder, sandbox=config.sandbox, repo_root=str(PROJECT_ROOT), commit=commit,
                                tasks_subdir=subdir, artifact_root=artifact_root, code=code)
                previous = step(spec, previous.store_key if previous else None, previous.store_sha256 if previous else None)
                steps.append(previous.step)
        results.append(summarize(manifest.sequence_id, agent, steps))
    return results


@flow(name=SUITE, log_prints=False)
def write_path_flow(config: RunConfig, run_id: str, artifact_root: str) -> str:
    """The write-path suite; returns the stored result's artifact key."""
    progress = reporter()
    progress.start(suite_stage(SUITE), 1)
    results = run_write_path(config, run_id, artifact_root)
    key = suite_key(run_id, SUITE)
    payload = json.dumps([r.model_dump(mode="json") for r in results], indent=2, sort_keys=True)
    stages.artifact_store(artifact_root).put_bytes(key, payload.encode("utf-8"))
    progress.advance(suite_stage(SUITE))
    progress.finish(suite_stage(SUITE))
    return key
