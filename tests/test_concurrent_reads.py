"""Grading reads a run's evidence concurrently (each read an S3 round trip at scale), with the same
result as one read at a time, and a tampered file is still named. The run is a real sealed `memtrial
paired` run; the store adds latency to every read (a real LocalStore underneath, named as such)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from tasks_lib.analysis.evidence import load_evidence
from tasks_lib.artifacts import LocalStore
from tasks_lib.run.records import read_records
from tasks_lib.run.seal import TamperedRunError, verify_run
from test_hostile_tampered_results import _copy, sealed_run  # noqa: F401 - the module-scoped real run


class SlowLocalStore(LocalStore):
    """A LocalStore whose reads each take `delay` seconds (an S3 round trip), counting readers in flight."""

    def __init__(self, root: Path, delay: float = 0.2) -> None:
        super().__init__(root)
        self.delay, self.in_flight, self.most = delay, 0, 0
        self._lock = threading.Lock()

    def get_bytes(self, key: str) -> bytes:
        with self._lock:
            self.in_flight += 1
            self.most = max(self.most, self.in_flight)
        try:
            time.sleep(self.delay)
            return super().get_bytes(key)
        finally:
            with self._lock:
                self.in_flight -= 1


def test_grading_reads_a_runs_evidence_concurrently_and_finds_the_same(sealed_run: tuple[Path, str]) -> None:  # noqa: F811
    """The failure prevented: grading reading every record's transcript and receipts one after another,
    so a large run on S3 grades at one round trip per file."""
    root, run_id = sealed_run
    plain = LocalStore(root)
    records = read_records(plain, run_id)
    slow = SlowLocalStore(root)

    assert verify_run(slow, run_id) == verify_run(plain, run_id)
    assert slow.most > 1, "the manifest's files were read one at a time"
    slow.most = 0
    assert load_evidence(slow, records) == load_evidence(plain, records)
    assert slow.most > 1, "the records' evidence was read one at a time"


def test_concurrent_verification_still_names_the_changed_file(sealed_run: tuple[Path, str], tmp_path: Path) -> None:  # noqa: F811
    """The failure prevented: a concurrent read losing a tampered file's problem (or its order)."""
    root, run_id, run_dir = _copy(sealed_run, tmp_path)
    audit = next(run_dir.rglob("audit.json"))
    audit.write_text(audit.read_text().replace('"passed": true', '"passed": false'))
    try:
        verify_run(SlowLocalStore(root, delay=0.05), run_id)
    except TamperedRunError as error:
        assert audit.relative_to(root).as_posix() in str(error) and "changed after the run" in str(error)
    else:
        raise AssertionError("a tampered audit receipt verified")
