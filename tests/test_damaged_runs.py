"""Damaged runs stay listable (issue #35, item 3; #30, item 1). Two real runs of `memtrial paired` (the
calibration agent; the flow, its seal and its per-attempt records all real) are made once; each test
damages a copy of one of them (200 bytes overwritten with the footer intact, truncated, a tampered
row, a duplicate row, a missing file) and drives `memtrial runs`, `show` and `report` in a
subprocess, as a user would: one line naming the file and what to do, never a traceback, never an
abort, and `runs` still lists the other run (the damaged one as `unreadable`, exit 0). The records
reader refuses a table and per-attempt records that disagree; a failed paired run recommends only
commands that accept it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from flows.cli.main import main
from tasks_lib.artifacts import LocalStore
from tasks_lib.run.index import run_files
from tasks_lib.run.layout import MANIFEST_JSON, RECORD_JSON, RECORDS_TABLE, RUNS, attempt_file
from tasks_lib.run.records import RecordsDisagreeError, read_records
from tasks_lib.run.seal import seal_run

TASKS = ("rotlog-keep-count", "logship-partial-exit")
REPO = Path(__file__).resolve().parents[1]
ABORT_TRIES = 20
"""Fresh interpreters reading a corrupted table: the abort came at exit, in some tries only."""


@pytest.fixture(scope="module")
def two_runs(prefect_harness: None, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str]:
    """(artifact root, the run to damage: two tasks off and on, an intact run: one task off), made by the real flow."""
    root = tmp_path_factory.mktemp("damaged") / "artifacts"
    assert main(["paired", "--embedder", "hashed", "--tasks", ",".join(TASKS), "--conditions", "off,on", "--artifacts", str(root), "--plain"]) == 0
    (target,) = run_files(LocalStore(root))
    assert main(["paired", "--embedder", "hashed", "--tasks", TASKS[0], "--conditions", "off", "--artifacts", str(root), "--plain"]) == 0
    (other,) = set(run_files(LocalStore(root))) - {target}
    return root, target, other


def _copy(two_runs: tuple[Path, str, str], tmp_path: Path) -> tuple[Path, Path]:
    root, target, _ = two_runs
    copy = tmp_path / "artifacts"
    shutil.copytree(root, copy)
    return copy, copy / RUNS / target


def _cli(*argv: str) -> subprocess.CompletedProcess[str]:
    """The real `memtrial` command in a fresh interpreter."""
    return subprocess.run([sys.executable, "-m", "flows.cli.main", *argv], capture_output=True, text=True, cwd=REPO, timeout=120,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))})


def _rows(run_dir: Path) -> tuple[list[dict[str, object]], pa.Schema]:
    table = pq.read_table(run_dir / RECORDS_TABLE, use_threads=False)
    return table.to_pylist(), table.schema


def overwritten(run_dir: Path) -> str:
    """200 bytes overwritten inside the table, its footer intact."""
    path = run_dir / RECORDS_TABLE
    data = bytearray(path.read_bytes())
    data[100:300] = b"\xab" * 200
    path.write_bytes(bytes(data))
    return RECORDS_TABLE


def truncated(run_dir: Path) -> str:
    """The table cut to half its length."""
    path = run_dir / RECORDS_TABLE
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    return RECORDS_TABLE


def tampered(run_dir: Path) -> str:
    """A valid table whose first row's outcome was flipped (its record.json says otherwise)."""
    rows, schema = _rows(run_dir)
    rows[0]["outcome"] = "pass" if rows[0]["outcome"] != "pass" else "fail"
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), run_dir / RECORDS_TABLE)
    return RECORDS_TABLE


def duplicated(run_dir: Path) -> str:
    """A table holding one attempt twice, sealed so (what `tasks: [X, X]` stored)."""
    rows, schema = _rows(run_dir)
    pq.write_table(pa.Table.from_pylist([*rows, rows[0]], schema=schema), run_dir / RECORDS_TABLE)
    seal_run(LocalStore(run_dir.parents[1]), run_dir.name)
    return RECORDS_TABLE


def table_missing(run_dir: Path) -> str:
    """The sealed records table gone."""
    (run_dir / RECORDS_TABLE).unlink()
    return RECORDS_TABLE


DAMAGES: dict[str, Callable[[Path], str]] = {
    "overwritten": overwritten, "truncated": truncated, "tampered-row": tampered, "duplicate-row": duplicated,
    "table-missing": table_missing,
}
"""A missing record.json is the records reader's `extra-row` case below (library-level, no subprocess)."""


def _one_clean_line(result: subprocess.CompletedProcess[str], names: str) -> str:
    assert "Traceback" not in result.stderr and result.returncode == 2, (result.returncode, result.stderr[-2000:])
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("memtrial: error: "), result.stderr
    assert names in result.stderr and ("run it again" in result.stderr or "restore" in result.stderr), result.stderr
    return result.stderr


@pytest.mark.parametrize("damage", list(DAMAGES), ids=list(DAMAGES))
def test_a_damaged_run_is_listed_unreadable_and_refused_in_one_line_never_a_traceback(
        two_runs: tuple[Path, str, str], tmp_path: Path, damage: str) -> None:
    """Regression: a damaged records table gave 65-71-line pyarrow tracebacks from `runs`, `show` and
    `report`, and `runs` lost the listing of every run on the root; a duplicate row made `runs` exit 2
    for the whole root."""
    root, run_dir = _copy(two_runs, tmp_path)
    _, target, other = two_runs
    names = DAMAGES[damage](run_dir)
    listed = _cli("runs", "--artifact-root", str(root))
    assert listed.returncode == 0 and "Traceback" not in listed.stderr, listed.stderr[-2000:]
    line = next(line for line in listed.stdout.splitlines() if line.startswith(f"{target}: unreadable: "))
    assert names in line and "run it again" in line, line
    assert other in listed.stdout and f"{other}: unreadable" not in listed.stdout, "the other run is still listed, readable"
    _one_clean_line(_cli("show", target, "--artifact-root", str(root)), names)
    _one_clean_line(_cli("report", target, "--artifacts", str(root)), names)


def test_power_refuses_a_run_whose_seal_is_gone_and_records_were_rewritten(two_runs: tuple[Path, str, str], tmp_path: Path) -> None:
    """Regression (attack F4): with manifest.json deleted and one off fail turned into a pass in both the
    table and its record.json, `memtrial power --run` planned from the forged off rate, exit 0, no warning."""
    import json

    root, run_dir = _copy(two_runs, tmp_path)
    _, target, _ = two_runs
    (run_dir / MANIFEST_JSON).unlink()
    rows, schema = _rows(run_dir)
    row = next(r for r in rows if r["condition"] == "off")
    row["outcome"] = "fail" if row["outcome"] == "pass" else "pass"
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), run_dir / RECORDS_TABLE)
    for record_file in run_dir.rglob("record.json"):
        record = json.loads(record_file.read_text())
        if (record["task_id"], record["condition"], record["trial"]) == (row["task_id"], "off", row["trial"]):
            record_file.write_text(json.dumps({**record, "outcome": row["outcome"]}))
    result = _cli("power", "--run", target, "--artifacts", str(root))
    assert result.returncode == 2 and "Traceback" not in result.stderr, (result.returncode, result.stdout, result.stderr[-2000:])
    assert MANIFEST_JSON in result.stderr and result.stderr.count("\n") == 1, result.stderr


def test_a_corrupted_table_never_aborts_the_interpreter_at_exit(two_runs: tuple[Path, str, str], tmp_path: Path) -> None:
    """Regression: `report` on a damaged run printed its one-line error and then died of SIGABRT (exit
    134) in 7 of 26 tries: pyarrow's thread pool, given a corrupted buffer, raised and then called
    std::terminate when the interpreter exited (`use_threads=False` alone did not prevent it). Every try
    in a fresh interpreter must exit cleanly."""
    root, run_dir = _copy(two_runs, tmp_path)
    data = bytearray((run_dir / RECORDS_TABLE).read_bytes())
    data[800:1000] = bytes(200)  # a data page: its snappy block no longer decompresses
    (run_dir / RECORDS_TABLE).write_bytes(bytes(data))
    (run_dir / MANIFEST_JSON).unlink()  # unsealed (stopped before its seal), so the reader must parse it
    script = ("import sys\nfrom pathlib import Path\nfrom tasks_lib.artifacts import LocalStore\nfrom tasks_lib.run.records import read_records\n"
              "try:\n    read_records(LocalStore(Path(sys.argv[1])), sys.argv[2])\nexcept Exception as error:\n"
              "    print(type(error).__name__, error)\n")
    codes = []
    for _ in range(ABORT_TRIES):
        result = subprocess.run([sys.executable, "-c", script, str(root), run_dir.name], capture_output=True, text=True, timeout=60,
                                env={**os.environ, "PYTHONPATH": str(REPO)})
        codes.append(result.returncode)
        assert "terminate called" not in result.stderr, result.stderr
    assert codes == [0] * ABORT_TRIES
    assert result.stdout.startswith("UnreadableRecordsError ") and f"{RECORDS_TABLE}: not a readable Parquet table" in result.stdout


def _disagree_row_missing(run_dir: Path) -> str:
    rows, schema = _rows(run_dir)
    pq.write_table(pa.Table.from_pylist(rows[1:], schema=schema), run_dir / RECORDS_TABLE)
    seal_run(LocalStore(run_dir.parents[1]), run_dir.name)  # resealed: the seal alone would not see it
    return "no row for "


def _disagree_extra_row(run_dir: Path) -> str:
    (run_dir / attempt_file(TASKS[0], "off", 0, RECORD_JSON)).unlink()
    seal_run(LocalStore(run_dir.parents[1]), run_dir.name)
    return "has no per-attempt record"


def _disagree_field(run_dir: Path) -> str:
    rows, schema = _rows(run_dir)
    rows[-1]["input_tokens"] = int(rows[-1]["input_tokens"]) + 1  # type: ignore[call-overload]
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), run_dir / RECORDS_TABLE)
    seal_run(LocalStore(run_dir.parents[1]), run_dir.name)
    return "field 'input_tokens'"


DISAGREEMENTS = {"row-missing": _disagree_row_missing, "extra-row": _disagree_extra_row, "field-differs": _disagree_field}


@pytest.mark.parametrize("kind", list(DISAGREEMENTS), ids=list(DISAGREEMENTS))
def test_the_records_reader_refuses_a_table_that_disagrees_with_the_per_attempt_records(
        two_runs: tuple[Path, str, str], tmp_path: Path, kind: str) -> None:
    """Regression: four readers took a run's records from the table or from the record.json files and
    nothing checked that the two agreed, so a row removed, added or edited changed the figures."""
    root, run_dir = _copy(two_runs, tmp_path)
    assert len(read_records(LocalStore(root), run_dir.name)) == 2 * len(TASKS), "the intact copy reads"
    expected = DISAGREEMENTS[kind](run_dir)
    with pytest.raises(RecordsDisagreeError, match="the records table and the per-attempt records disagree") as refused:
        read_records(LocalStore(root), run_dir.name)
    assert expected in str(refused.value) and RECORDS_TABLE in str(refused.value)


def test_a_failed_paired_run_recommends_only_commands_that_accept_it(
        two_runs: tuple[Path, str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Regression: a failed `paired` run said "'memtrial rerun paired-...' recomputes only the failed
    stages", and `memtrial rerun` refuses paired runs (it needs a stored run config)."""
    root = tmp_path / "artifacts"
    root.mkdir()
    (root / RUNS).write_text("not a folder\n")  # the run fails as it starts writing under runs/
    capsys.readouterr()
    assert main(["paired", "--embedder", "hashed", "--tasks", TASKS[0], "--conditions", "off", "--artifacts", str(root), "--plain"]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("memtrial: error: ") and "memtrial rerun paired-" not in err, err
    if " failed: " in err:  # the run started: its hint names what takes a paired run
        run_id = err.split("run ", 1)[1].split(" ", 1)[0]
        assert f"'memtrial show {run_id}'" in err and "'memtrial paired'" in err, err
