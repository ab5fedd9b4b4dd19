"""The `grep` arm's folder: the task's recorded transcripts as plain files the agent may read.

No memory system is involved: the runner copies the identical, pinned transcript bytes into a
runner-owned folder of the attempt's scratch root (outside the workspace, so the mutation audit
and the check never see it), makes it read-only, and names it to the agent in `HISTORY_ENV` only.
No other condition gets the folder or the variable. `write_history` returns every file it wrote by
SHA-256, and `release_history` makes the folder removable again and says whether the agent changed
any of them (which fails the attempt).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from tasks_lib.corpus.feed import feed_documents
from tasks_lib.corpus.tasks import LoadedTask
from tasks_lib.trees import sha256_file

HISTORY_DIR = "history"
"""The folder's name inside the attempt's scratch root (a neutral name: the agent sees its path)."""
READ_ONLY_FILE = stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH
READ_ONLY_DIR = READ_ONLY_FILE | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH


def write_history(task: LoadedTask, root: Path, condition: str = "grep") -> dict[str, str]:
    """Write the task's transcripts (pinned bytes, checked) into `root/HISTORY_DIR`, read-only; return
    {file name: sha256}. Raises FeedError for a task without transcripts (nothing is written)."""
    documents = feed_documents(task.root, task.manifest, condition)
    folder = root / HISTORY_DIR
    folder.mkdir()
    digests = {}
    for name, data, _ in documents:
        path = folder / name
        path.write_bytes(data)
        path.chmod(READ_ONLY_FILE)
        digests[name] = sha256_file(path)
    folder.chmod(READ_ONLY_DIR)
    return digests


def release_history(root: Path, expected: dict[str, str]) -> str | None:
    """Make the folder removable again; return why it differs from `expected` (None: unchanged). A
    changed folder is the agent's violation: the attempt fails, naming it."""
    folder = root / HISTORY_DIR
    if not folder.is_dir() or folder.is_symlink():
        return f"the read-only history folder {HISTORY_DIR}/ was removed or replaced during the attempt"
    os.chmod(folder, 0o755)
    found = {p.name: (sha256_file(p) if p.is_file() and not p.is_symlink() else "not a file") for p in folder.iterdir()}
    if found == expected:
        return None
    changed = sorted({name for name, _ in set(found.items()) ^ set(expected.items())})
    return f"the read-only history folder {HISTORY_DIR}/ changed during the attempt: {', '.join(changed)}"
