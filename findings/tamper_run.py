"""Finding F4 (records reader, `memtrial power`): consistently tamper a stored run and drop its seal.

Usage: python findings/tamper_run.py ARTIFACT_ROOT RUN_ID TASK
Copies nothing: edits ARTIFACT_ROOT in place (use a copy). Deletes runs/RUN/manifest.json, then turns
TASK's `off` t0 record into a pass in BOTH records.parquet and its record.json, so `read_records`
finds them in agreement and, with no seal, checks no digest. `memtrial report`, `compare` refuse the
run (verify_run: manifest missing) and `memtrial show` says "evidence: NOT INTACT", but
`memtrial power --run RUN --artifacts ARTIFACT_ROOT` plans from the tampered off rates, exit 0, no word.
"""

import json
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

root, run_id, task = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
run = root / "runs" / run_id
(run / "manifest.json").unlink()
table = pq.read_table(run / "records.parquet")
rows = table.to_pylist()
for row in rows:
    if row["task_id"] == task and row["condition"] == "off" and row["trial"] == 0:
        row["outcome"], row["failure_reason"] = "pass", None
pq.write_table(pa.Table.from_pylist(rows, schema=table.schema), run / "records.parquet")
record = run / "attempts" / task / "off" / "t0" / "record.json"
data = json.loads(record.read_text())
data["outcome"], data["failure_reason"] = "pass", None
record.write_text(json.dumps(data))
print(f"{run}: seal removed; {task}/off/t0 now 'pass' in the table and its record.json")
