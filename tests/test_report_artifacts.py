"""The report's tables as Prefect artifacts: published by a real flow run against a real Prefect API
(`prefect_test_harness`) and read back through the Prefect client."""

from __future__ import annotations

from pathlib import Path

from flows.report_artifacts import artifact_key, publish_report_artifacts
from tasks_lib.analysis.stats import adjusted_mean_interval
from tasks_lib.artifacts import LocalStore
from tasks_lib.report.markdown import md_table
from test_grading import scenario_records, store_scenario

RUN = "scenario-run"


def _read(keys: list[str]) -> dict[str, object]:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey

    with get_client(sync_client=True) as client:
        found = client.read_artifacts(artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=keys)))
    return {a.key: a for a in found}


def test_report_tables_show_up_as_prefect_artifacts(prefect_harness: None, tmp_path: Path) -> None:
    root = tmp_path / "artifacts"
    store_scenario(LocalStore(root), scenario_records(RUN))
    keys = publish_report_artifacts(str(root), RUN)
    assert keys == [f"memtrial-{RUN}-{name}" for name in ("summary", "pass-rates", "mui", "ablations")]
    stored = _read(keys)
    assert set(stored) == set(keys)
    summary = stored[f"memtrial-{RUN}-summary"]
    assert summary.type == "markdown"
    assert "DISTRUST: delivery confirmed on only 7 of 8" in str(summary.data) and "| * | 7 | 2 | 1 | 1 | +28.6 pp |" in str(summary.data)
    low = f"{adjusted_mean_interval([1, 0, 0, 1], -1, 1).lower * 100:+.1f}"
    net_low = f"{adjusted_mean_interval([1, 0.5, -0.5, 0], -1, 1).lower * 100:+.1f}"
    assert (f"| on - off | 4 | +50.0 (exploratory) | {low} | +100.0 | p = 0.5 (exact) | -981 | +25.0 | {net_low} | +100.0 | "
            "p = 0.75 (exact) |") in str(summary.data), "the headline reaches Prefect, in pp, with how each p was counted"
    mui = stored[f"memtrial-{RUN}-mui"]
    assert mui.type == "table" and "3/7" in str(mui.data)


def test_artifact_keys_are_valid_prefect_keys() -> None:
    assert artifact_key("Paired-20261202_1600.ab", "pass-rates") == "memtrial-paired-20261202-1600-ab-pass-rates"


def test_markdown_cells_cannot_break_the_table() -> None:
    assert md_table(["a"], [["x | y\nz"]]).splitlines()[-1] == "| x \\| y z |"
