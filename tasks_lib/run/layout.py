"""The layout of a run's folder, `runs/<run_id>/` under the artifact root: every name defined once.

Writers (the arm's steps, the flows, grading, the report) and readers (`tasks_lib.run.records`,
`tasks_lib.run.index`, the seal, admission, publication) build a run's keys from these names only, so a
file cannot be written under one name and looked for under another. Three names are defined by
the modules this package builds on, which cannot import it, and named here too: `RUNS` and
`SUITES_FOLDER` (the artifact store's keys) and `RECORD_JSON` (beside the `RunRecord` contract).

```
runs/<run_id>/
  records.parquet            the records table (one row per attempt), sealed
  manifest.json              the seal: sha256 and size of every sealed file
  status.json                the status marker (running / complete / failed), never sealed
  provenance.json            what produced the run (build, memory system, config, machine)
  run-config.json            a nightly run's resolved config
  nightly.json               a nightly run's summary
  run-warnings.json          distrust warnings from outside the records
  summary.json grades.parquet ablations.parquet audit_receipts.parquet   grading's outputs
  admissions.parquet         admission decisions
  report.html                the HTML report
  secret/realms.key          the per-run realm secret, never published
  suites/<name>.json         suite results
  budget/...                 budget-guard decisions
  attempts/<task>/<condition>/t<trial>/   one attempt's evidence, sealed:
      record.json transcript.json audit.json delivery.json check.txt
```
"""

from __future__ import annotations

from tasks_lib.artifacts import RUNS, SUITES_FOLDER  # noqa: F401 - defined with the store's keys, named here too
from tasks_lib.contracts import RECORD_JSON  # noqa: F401 - defined beside its contract, named here too

RECORDS_TABLE = "records.parquet"
"""The run's records table: one row per attempt (sealed evidence)."""
MANIFEST_JSON = "manifest.json"
"""The run's seal: the digest of every piece of its evidence (`tasks_lib.run.seal`)."""
STATUS_JSON = "status.json"
"""The run's status marker (`tasks_lib.run.status`); never sealed (it changes when the run ends)."""
PROVENANCE_JSON = "provenance.json"
"""What produced the run (`tasks_lib.run.provenance`); describes the run, backs no outcome."""
RUN_CONFIG_JSON = "run-config.json"
"""A nightly run's resolved run config."""
NIGHTLY_JSON = "nightly.json"
"""A nightly run's summary (agents' runs, suites, trend)."""
RUN_WARNINGS_JSON = "run-warnings.json"
"""Distrust warnings from outside the records, stored by the flow that ran the run."""
SUMMARY_JSON = "summary.json"
"""Grading's summary (`GradingSummary`)."""
GRADES_TABLE = "grades.parquet"
"""Grading's one row per graded attempt."""
ABLATIONS_TABLE = "ablations.parquet"
"""Grading's marginal lane deltas and harness check."""
AUDIT_TABLE = "audit_receipts.parquet"
"""Grading's one row per mutation-audit receipt."""
ADMISSIONS_TABLE = "admissions.parquet"
"""Admission decisions (`tasks_lib.analysis.admission`)."""
REPORT_HTML = "report.html"
"""The self-contained HTML report."""
SECRET_FOLDER = "secret"
"""Per-run secrets (never published, never seen by an agent)."""
REALMS_KEY = f"{SECRET_FOLDER}/realms.key"
"""The per-run realm secret, under the run's secret folder."""
BUDGET_FOLDER = "budget"
"""The budget guard's recorded decisions."""

ATTEMPTS = "attempts"
"""The folder of every attempt's evidence (sealed whole)."""
TRANSCRIPT_JSON = "transcript.json"
"""An attempt's transcript."""
AUDIT_JSON = "audit.json"
"""An attempt's mutation-audit receipt."""
DELIVERY_JSON = "delivery.json"
"""An attempt's delivery receipt, written by the runner's delivery witness."""
CHECK_TXT = "check.txt"
"""An attempt's stored check output."""

SEALED_PARTS = (f"{ATTEMPTS}/",)
"""Folders of a run whose every file is evidence (besides the records table)."""


def attempt_parts(task_id: str, condition: str, trial: int) -> tuple[str, ...]:
    """Key parts under `runs/<run_id>/` of one attempt's folder: `attempts/<task>/<condition>/t<trial>`
    (a condition's `:` written `-`, so `ablate:graph` is `ablate-graph`)."""
    return (ATTEMPTS, task_id, condition.replace(":", "-"), f"t{trial}")


def attempt_file(task_id: str, condition: str, trial: int, name: str) -> str:
    """One attempt's file relative to its run's folder, e.g. `attempts/t1/on/t0/record.json`."""
    return "/".join((*attempt_parts(task_id, condition, trial), name))


def is_attempt_record(rel: str) -> bool:
    """Whether `rel` (relative to the run's folder) is an attempt's `record.json`."""
    parts = rel.split("/")
    return len(parts) == 5 and parts[0] == ATTEMPTS and parts[4] == RECORD_JSON
