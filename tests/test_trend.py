"""Trend snapshots in the artifact store (local folder and a real S3 server), the regression gate and `memtrial trend`."""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import boto3
import pytest

from flows.cli.main import main
from flows.runtime.settings import build_under_test
from gitrepo import MakeRepo, write_files
from tasks_lib.analysis.trend import (
    Snapshot,
    TrendError,
    append_snapshot,
    comparability_key,
    curve_folder,
    curve_key,
    load_trend,
    regressions,
)
from tasks_lib.artifacts import ArtifactStore, S3Settings, open_store

T0 = datetime(2026, 12, 1, 3, 0, tzinfo=UTC)


def snap(scores: dict[str, float] | None = None, *, hours: int = 0, adapter: str = "reference", knee: float | None = None,
         cases: str = "c" * 64, gated: dict[str, Any] | None = None) -> Snapshot:
    scores = scores if scores is not None else {"recall_at_5": 0.9, "stale_recall": 0.0}
    return Snapshot(
        suite="retrieval", case_set_digest=cases, adapter=adapter, config_digest="d" * 64, build=f"memtrial 0.1.0+b{hours}",
        time=T0 + timedelta(hours=hours), scores=scores, counts={"cases": 81}, knee=knee,
        gated=gated if gated is not None else {"recall_at_5": "higher", "stale_recall": "lower"},
    )


@pytest.fixture(params=["local", "s3"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> ArtifactStore:
    if request.param == "local":
        return open_store(tmp_path / "artifacts")
    request.getfixturevalue("s3_env")
    bucket = f"trend-{tmp_path.name.lower().replace('_', '-')[-40:]}"
    boto3.client("s3", endpoint_url=S3Settings.from_env().endpoint_url, region_name="us-east-1").create_bucket(Bucket=bucket)
    return open_store(f"s3://{bucket}/nightly")


def test_snapshot_key_is_computed_and_checked() -> None:
    s = snap()
    assert s.comparability_key == comparability_key("retrieval", "c" * 64, "reference", "d" * 64)
    with pytest.raises(ValueError, match="comparability_key does not match"):
        Snapshot.model_validate({**s.model_dump(), "comparability_key": "0" * 64})
    with pytest.raises(ValueError, match="timezone"):
        Snapshot.model_validate({**s.model_dump(), "time": datetime(2026, 12, 1)})
    with pytest.raises(ValueError, match="not finite"):
        snap({"recall_at_5": float("nan")})
    with pytest.raises(ValueError, match="gated metrics stale_recall have no score"):
        snap({"recall_at_5": 0.9})


def test_append_and_load_round_trip(store: ArtifactStore) -> None:
    assert load_trend(store, "retrieval") == []
    later = append_snapshot(store, snap({"recall_at_5": 0.8, "stale_recall": 0.0}, hours=2))
    key = append_snapshot(store, snap(hours=1))
    assert key.startswith(curve_folder("retrieval")) and key.endswith(".parquet")
    curve = load_trend(store, "retrieval")
    assert [s.scores["recall_at_5"] for s in curve] == [0.9, 0.8], "oldest first, whatever the order of the appends"
    assert curve[0] == snap(hours=1)
    assert store.list_keys("trend") == sorted([key, later])  # one object per snapshot, nothing half-written beside them


def test_concurrent_appends_all_land(store: ArtifactStore) -> None:
    """Regression: appends used to rewrite one table, so two at once could lose one snapshot."""
    from concurrent.futures import ThreadPoolExecutor

    append_snapshot(store, snap())
    barrier = threading.Barrier(8)

    def append(hours: int) -> str:
        barrier.wait()  # all eight read the curve, then all eight write
        return append_snapshot(store, snap(hours=hours))

    with ThreadPoolExecutor(8) as pool:
        keys = list(pool.map(append, range(1, 9)))
    assert len(set(keys)) == 8
    assert [s.time for s in load_trend(store, "retrieval")] == [snap(hours=h).time for h in range(9)]


def test_a_curve_written_as_one_table_is_still_read(tmp_path: Path) -> None:
    import pyarrow as pa

    from tasks_lib.analysis.trend import _row

    local = open_store(tmp_path)
    local.put_table(curve_key("retrieval"), pa.Table.from_pylist([_row(snap()), _row(snap(hours=2))]))
    append_snapshot(local, snap(hours=1))
    assert [s.time for s in load_trend(local, "retrieval")] == [snap(hours=h).time for h in (0, 1, 2)]


def test_curve_names_cannot_nest(store: ArtifactStore) -> None:
    with pytest.raises(TrendError, match="curve name 'retrieval/x'"):
        append_snapshot(store, snap(), curve="retrieval/x")


def test_snapshots_of_different_runs_never_share_a_curve(store: ArtifactStore) -> None:
    append_snapshot(store, snap())
    with pytest.raises(TrendError, match=r"not comparable.*adapter 'reference' vs 'chroma'.*--curve"):
        append_snapshot(store, snap(adapter="chroma", hours=1))
    with pytest.raises(TrendError, match="case_set_digest"):
        append_snapshot(store, snap(cases="e" * 64, hours=1))
    assert len(load_trend(store, "retrieval")) == 1
    append_snapshot(store, snap(adapter="chroma", hours=1), curve="retrieval-chroma")
    assert len(load_trend(store, "retrieval-chroma")) == 1


def test_a_damaged_curve_is_a_clear_error(tmp_path: Path) -> None:
    import pyarrow as pa

    local = open_store(tmp_path)
    local.put_table("trend/retrieval/20261201T000000000000Z-0.parquet", pa.Table.from_pylist([{"suite": "retrieval", "scores": "{}"}]))
    with pytest.raises(TrendError, match=r"trend/retrieval/20261201T000000000000Z-0.parquet: row 0 is not a valid snapshot"):
        load_trend(local, "retrieval")


REGRESSIONS = [
    ("higher-metric-fell", {"recall_at_5": 0.8, "stale_recall": 0.0}, None, ["recall_at_5 fell from 0.9 to 0.8"]),
    ("lower-metric-rose", {"recall_at_5": 0.9, "stale_recall": 0.1}, None, ["stale_recall rose from 0 to 0.1"]),
    ("improvement", {"recall_at_5": 0.95, "stale_recall": 0.0}, None, []),
    ("metric-went-missing", {"stale_recall": 0.0}, None, ["recall_at_5 was 0.9, now not measured"]),
    ("knee-moved", {"recall_at_5": 0.9, "stale_recall": 0.0}, (100.0, 40.0), ["knee moved from 100 to 40"]),
    ("knee-vanished", {"recall_at_5": 0.9, "stale_recall": 0.0}, (100.0, None), ["knee moved from 100 to none"]),
    ("knee-held", {"recall_at_5": 0.9, "stale_recall": 0.0}, (100.0, 100.0), []),
]


@pytest.mark.parametrize(("current", "knees", "expected"), [r[1:] for r in REGRESSIONS], ids=[r[0] for r in REGRESSIONS])
def test_regressions_name_the_metric_and_both_values(current: dict[str, float], knees: tuple[float | None, float | None] | None, expected: list[str]) -> None:
    before_knee, after_knee = knees or (None, None)
    previous = snap(knee=before_knee)
    now = snap(current, hours=1, knee=after_knee, gated={})
    messages = regressions(previous, now, {"recall_at_5": "higher", "stale_recall": "lower"})
    assert [m.removeprefix("retrieval: ").split(" (")[0] for m in messages] == expected


def test_regression_tolerance_knee_switch_and_plain_metric_lists() -> None:
    previous, current = snap(knee=100), snap({"recall_at_5": 0.89, "stale_recall": 0.0}, hours=1, knee=250)
    assert regressions(previous, current, ["recall_at_5"], knee=False, tolerance=0.02) == []
    assert len(regressions(previous, current, ["recall_at_5"], knee=True)) == 2


def test_regressions_refuse_incomparable_snapshots() -> None:
    with pytest.raises(TrendError, match="adapter"):
        regressions(snap(), snap(adapter="chroma"), ["recall_at_5"])


def test_trend_command_plots_tables_and_gates(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "artifacts"
    local = open_store(root)
    assert main(["trend", "--artifacts", str(root)]) == 2
    assert "no curve 'retrieval'" in capsys.readouterr().err
    append_snapshot(local, snap(hours=1))
    assert main(["trend", "--artifacts", str(root)]) == 0
    assert "nothing to compare" in capsys.readouterr().out
    append_snapshot(local, snap({"recall_at_5": 0.92, "stale_recall": 0.0}, hours=2))
    plot = tmp_path / "plots" / "trend.png"
    assert main(["trend", "--artifacts", str(root), "--out", str(plot)]) == 0
    assert plot.read_bytes().startswith(b"\x89PNG") and "no regression" in capsys.readouterr().out
    append_snapshot(local, snap({"recall_at_5": 0.7, "stale_recall": 0.0}, hours=3))
    assert main(["trend", "--artifacts", str(root), "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["regressions"] == ["retrieval: recall_at_5 fell from 0.92 to 0.7 (higher is better)"]
    assert len(report["snapshots"]) == 3 and local.get_bytes("trend/retrieval.png").startswith(b"\x89PNG")


def test_a_suite_name_finds_its_only_curve_and_a_wrong_name_lists_the_curves(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`trend --suite recall` after `make demo` failed: the demo stores `recall-reference-minilm` and the error named no curve."""
    root = tmp_path / "artifacts"
    local = open_store(root)
    scores = {"recall_at_100": 0.5, "recall_at_40": 0.7, "recall_at_10": 0.9}
    append_snapshot(local, snap(scores, gated={m: "higher" for m in scores}), curve="recall-reference-minilm")
    assert main(["trend", "--suite", "recall", "--artifacts", str(root)]) == 0
    output = capsys.readouterr().out
    assert "trend recall-reference-minilm" in output
    assert output.index("recall_at_10 ") < output.index("recall_at_40 ") < output.index("recall_at_100 ")
    append_snapshot(local, snap(), curve="recall-chroma-minilm")
    assert main(["trend", "--suite", "recall", "--artifacts", str(root)]) == 2
    error = capsys.readouterr().err
    assert "2 curves start with 'recall'" in error and "recall-chroma-minilm, recall-reference-minilm" in error
    assert main(["trend", "--suite", "staleness", "--artifacts", str(root)]) == 2
    assert "curves held: recall-chroma-minilm, recall-reference-minilm" in capsys.readouterr().err


def test_trend_command_on_s3(s3_env: str, capsys: pytest.CaptureFixture[str]) -> None:
    boto3.client("s3", endpoint_url=s3_env, region_name="us-east-1").create_bucket(Bucket="trend-cli")
    remote = open_store("s3://trend-cli/ci")
    append_snapshot(remote, snap(knee=100))
    append_snapshot(remote, snap(hours=1, knee=40))
    assert main(["trend", "--artifacts", "s3://trend-cli/ci"]) == 1
    output = capsys.readouterr().out
    assert "REGRESSION retrieval: knee moved from 100 to 40" in output and "knee" in output
    assert remote.exists("trend/retrieval.png")


def test_build_under_test_names_the_commit_and_a_dirty_tree(make_repo: MakeRepo, tmp_path: Path) -> None:
    """A snapshot's build says which commit ran, marks uncommitted changes, and never guesses outside git."""
    repo, commit = make_repo({"a.py": "x = 1\n"})
    clean = build_under_test(repo)
    assert clean.startswith("memtrial ") and clean.endswith(f"+{commit[:12]}")
    write_files(repo, {"a.py": "x = 2\n"})
    assert build_under_test(repo) == f"{clean}.dirty"
    outside = tmp_path / "not-a-repo"
    outside.mkdir()
    assert build_under_test(outside).endswith("+unknown")
