"""The wheel: every package and the bundled suite data ship in it, and an installed copy runs a suite."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path
from typing import Any

import pytest

from tasks_lib.errors import MemtrialError
from tasks_lib.resources import BUNDLED_PACKAGE, BUNDLED_SETS, bundled_folder

ROOT = Path(__file__).resolve().parents[1]
BUILD_INPUTS = ("pyproject.toml", "README.md", "tasks_lib", "flows", "corpora")
"""What the wheel is built from (copied, so the build leaves nothing in the checkout)."""
GATES = {"schema_version": 1, "recall_at_5_min": 0.5, "mrr_min": 0.5}
"""Low bars, so the exit status speaks of the install, not of the default gates."""


def _declared_packages() -> list[str]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]["packages"]


def test_every_package_folder_is_declared() -> None:
    """A new subpackage left out of pyproject's list would be missing from an installed wheel (ImportError there only)."""
    found = {
        ".".join(init.parent.relative_to(ROOT).parts)
        for top in ("tasks_lib", "flows")
        for init in (ROOT / top).rglob("__init__.py")
    }
    assert set(_declared_packages()) == found | {BUNDLED_PACKAGE}


def test_bundled_data_in_a_checkout_is_the_top_level_corpora() -> None:
    """The editable install maps the bundled package to corpora/, so edits there are what the suites read."""
    assert [bundled_folder(name) for name in BUNDLED_SETS] == [ROOT / "corpora" / name for name in BUNDLED_SETS]
    with pytest.raises(MemtrialError, match="choose one of recall, retrieval"):
        bundled_folder("tasks")


def _env(**extra: str) -> dict[str, str]:
    """This process's environment without PYTHONPATH (it would put another tasks_lib first), plus `extra`."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | extra


def _run(memtrial: Path, cwd: Path, home: Path, gates: Path) -> dict[str, Any]:
    """`memtrial suite retrieval --json` (timings dropped), which must exit 0."""
    done = subprocess.run(
        [str(memtrial), "suite", "retrieval", "--embedder", "hashed", "--json", "--gates", str(gates)],
        cwd=cwd, env=_env(MEMTRIAL_HOME=str(home)), capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stderr
    payload = json.loads(done.stdout)
    for timing in ("index_ms", "search_ms_mean", "search_ms_p95"):
        payload["efficiency"].pop(timing)
    return payload


@pytest.mark.slow
def test_installed_wheel_runs_the_retrieval_suite_on_its_own_data(tmp_path: Path) -> None:
    """An installed wheel once had no case data (paths walked up to a checkout's corpora/): it must score as the checkout does."""
    source = tmp_path / "source"
    source.mkdir()
    for name in BUILD_INPUTS:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, source / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(ROOT / name, source / name)
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--no-input"]
    subprocess.run([*pip, "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-q", "-w", str(tmp_path / "dist"), str(source)],
                   check=True, capture_output=True, timeout=300)
    (wheel,) = (tmp_path / "dist").glob("memtrial-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for name in BUNDLED_SETS:
        shipped = {n for n in names if n.startswith(f"tasks_lib/bundled/{name}/")}
        assert shipped == {f"tasks_lib/bundled/{p.relative_to(ROOT / 'corpora').as_posix()}" for p in (ROOT / "corpora" / name).rglob("*.json")}
    assert not [n for n in names if n.startswith("tasks_lib/bundled/tasks/")], "corpora/tasks is read from git objects, not shipped"
    folder = ROOT / "tasks_lib" / "corpus" / "harness"
    harness = {f"tasks_lib/corpus/harness/{p.relative_to(folder).as_posix()}" for p in folder.rglob("*")
               if p.is_file() and "__pycache__" not in p.parts}
    assert harness and harness <= names, f"the post-turn harness (shims, judge, bin/jail) must ship in the wheel: {sorted(harness - names)}"

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    subprocess.run([*pip, "--python", str(venv / "bin" / "python"), "install", "--no-deps", "--no-index", "-q", str(wheel)],
                   check=True, capture_output=True, timeout=300)
    (site,) = (venv / "lib").glob("python3.*/site-packages")
    deps = [p for p in sys.path if p.endswith("site-packages") and Path(p).is_dir()]
    (site / "memtrial-deps.pth").write_text("".join(f"{p}\n" for p in deps), encoding="utf-8")
    imported = subprocess.run([str(venv / "bin" / "python"), "-c", "import tasks_lib; print(tasks_lib.__file__)"],
                              cwd=tmp_path, env=_env(), capture_output=True, text=True, check=True)
    assert Path(imported.stdout.strip()) == site / "tasks_lib" / "__init__.py"

    gates = tmp_path / "gates.json"
    gates.write_text(json.dumps(GATES), encoding="utf-8")
    installed = _run(venv / "bin" / "memtrial", tmp_path, tmp_path / "home", gates)
    checkout = _run(Path(sys.executable).with_name("memtrial"), ROOT, tmp_path / "home-checkout", gates)
    assert installed["cases"] and installed == checkout


def test_the_cpu_torch_of_the_makefile_and_dockerfile_is_the_release_the_embeddings_extra_pins() -> None:
    """PyPI's Linux torch wheel pulls in several GB of CUDA packages, so the Makefile and the worker
    image install the same release from PyTorch's CPU index first; a pin that drifts from the extra's
    makes pip replace that build with PyPI's."""
    extra = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"]
    (pinned,) = [requirement.split("==")[1] for requirement in extra["embeddings"] if requirement.startswith("torch==")]
    makefile = re.search(r"^TORCH_VERSION := (\S+)$", (ROOT / "Makefile").read_text(encoding="utf-8"), re.M)
    dockerfile = re.search(r"'torch==(\S+)\+cpu'", (ROOT / "deployments" / "Dockerfile").read_text(encoding="utf-8"))
    assert makefile and dockerfile
    assert makefile.group(1) == dockerfile.group(1) == pinned
