"""The preparation flow: every bundled task's fixture built from git, redacted and certified.

Each task's preparation is a cached, retryable Prefect task that reads the task from the corpus
pack, keyed on what defines it (the task folder's git tree and the digest of the stage code), so a
rerun re-uses every task whose inputs did not change. Receipts and a Parquet table go to the
artifact store under `runs/<run_id>/prepare/`.
"""

from __future__ import annotations

from pathlib import Path

from flows.runtime.settings import configure_prefect

configure_prefect()

import pyarrow as pa
from prefect import flow, task
from pydantic import BaseModel

from flows.stages import artifact_store, prepare_code_digest, prepare_task_corpus, retry_condition
from tasks_lib.arm.steps import task_subdir_of
from tasks_lib.artifacts import open_store, run_key
from tasks_lib.contracts import PreparedCorpus
from tasks_lib.corpus.build import resolve_commit
from tasks_lib.corpus.packs import publish_corpus_pack
from tasks_lib.corpus.prepare import find_task_manifests, fixture_tree_oid

PREPARATION_TABLE = "preparation.parquet"


class PreparationSummary(BaseModel):
    """What one preparation flow run did."""

    run_id: str
    artifact_root: str
    prepared: list[PreparedCorpus]
    cached: list[bool]
    table_key: str

    @property
    def clean(self) -> bool:
        """True when every corpus certified clean."""
        return all(p.certification.verdict == "clean" for p in self.prepared)


@task(name="store-preparation", retries=2, retry_delay_seconds=2, retry_condition_fn=retry_condition)
def store_preparation(artifact_root: str, run_id: str, prepared: list[PreparedCorpus]) -> str:
    """Write each PreparedCorpus and the summary table to the artifact store; return the table key."""
    store = open_store(artifact_root)
    for item in prepared:
        store.put_json(run_key(run_id, "prepare", item.name, "prepared.json"), item)
    rows = [
        {
            "name": p.name,
            "corpus_id": p.build.corpus_id,
            "commit": p.build.source.commit,
            "tree_oid": p.build.tree_oid,
            "files": len(p.build.files),
            "removed": len(p.redaction.removed),
            "verdict": p.certification.verdict,
            "findings": len(p.certification.findings),
            "files_scanned": sum(s.files_scanned for s in p.certification.scans),
        }
        for p in prepared
    ]
    key = run_key(run_id, "prepare", PREPARATION_TABLE)
    store.put_table(key, pa.Table.from_pylist(rows))
    return key


@flow(name="prepare", log_prints=False)
def prepare_flow(tasks_root: str, repo_root: str, artifact_root: str, run_id: str, revision: str = "HEAD") -> PreparationSummary:
    """Prepare every task under `tasks_root` from the git objects of `repo_root` at `revision`: the
    corpus folder is published as a pack first, and each task is prepared from the pack (as in the
    paired flow, so a Dask worker without the checkout can run it)."""
    repo = Path(repo_root).resolve()
    commit = resolve_commit(repo, revision, str(repo))
    subdir = task_subdir_of(Path(tasks_root), repo)
    pack = publish_corpus_pack(artifact_store(artifact_root), repo, commit, subdir)
    code = prepare_code_digest()
    futures = []
    for manifest in find_task_manifests(Path(tasks_root)):
        folder = manifest.parent.name
        _, tree = fixture_tree_oid(repo, commit, f"{subdir}/{folder}")
        futures.append(prepare_task_corpus.submit(pack, artifact_root, folder, tree, code))
    prepared = [f.result() for f in futures]
    cached = [bool(f.state.name == "Cached") for f in futures]
    table_key = store_preparation(artifact_root, run_id, prepared)
    return PreparationSummary(run_id=run_id, artifact_root=artifact_root, prepared=prepared, cached=cached, table_key=table_key)
