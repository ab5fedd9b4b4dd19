"""The frozen adapter config: read from the environment, reviewable, and part of the memory-config digest."""

from __future__ import annotations

import pytest

from tasks_lib.memory import adapter_config as frozen
from tasks_lib.memory.adapter_config import adapter_config
from tasks_lib.memory.registry import MEMORY_SYSTEMS, UnknownMemorySystemError
from tasks_lib.run.provenance import memory_config_digest


@pytest.mark.parametrize("name", sorted(MEMORY_SYSTEMS))
def test_every_registered_system_has_a_reviewable_config(name: str) -> None:
    """No system is measured without settings and a note a vendor can read, and its abstention rule is the adapter's."""
    config = adapter_config(name, "minilm")
    assert config.settings and config.note
    assert config.abstention == (MEMORY_SYSTEMS[name].abstention or "none")


def test_a_different_package_version_is_a_different_configuration(monkeypatch: pytest.MonkeyPatch) -> None:
    """Upgrading a system's package must not leave its numbers on the same line: the digest changes."""
    before = adapter_config("lancedb", "minilm")
    assert before.packages["lancedb"] != "missing"
    monkeypatch.setattr(frozen.metadata, "version", lambda name: "9.9.9")
    after = adapter_config("lancedb", "minilm")
    assert after.packages["lancedb"] == "9.9.9" and after.digest != before.digest


def test_a_changed_setting_or_embedder_changes_the_memory_config_digest(monkeypatch: pytest.MonkeyPatch) -> None:
    """The run provenance's memory digest folds in the adapter config: a setting edited in review, or
    the offline hashed embedder instead of MiniLM, is another configuration."""
    base = memory_config_digest("chroma", "minilm")
    assert memory_config_digest("chroma", "hashed") != base
    monkeypatch.setitem(frozen.SETTINGS, "chroma", {**frozen.SETTINGS["chroma"], "floor": "0.25"})
    assert memory_config_digest("chroma", "minilm") != base


def test_an_unknown_system_has_no_config() -> None:
    with pytest.raises(UnknownMemorySystemError, match="known memory systems"):
        adapter_config("redis", "minilm")


def test_a_run_names_the_config_of_the_system_it_measured() -> None:
    """The provenance of a paired run through the system provisioner carries that system's frozen config
    (so the report names it); a third party's own provisioner is 'not known', never the reference's."""
    from tasks_lib.memory.provisioner.system import SYSTEM_ENV
    from tasks_lib.run.provenance import run_provenance

    common = {"agent": "calibration", "conditions": ["off", "on"], "trials": 1, "corpus_commit": "0" * 40,
              "tasks_root": "corpora/tasks", "embedder": "hashed", "sandbox": "local"}
    argv = ("python", "-m", "tasks_lib.memory.provisioner.system")
    mem0 = run_provenance("r1", provisioner_argv=argv, provisioner_env={SYSTEM_ENV: "mem0"}, **common)  # type: ignore[arg-type]
    assert mem0.adapter_config == adapter_config("mem0", "hashed")
    lancedb = run_provenance("r2", provisioner_argv=argv, provisioner_env={SYSTEM_ENV: "lancedb"}, **common)  # type: ignore[arg-type]
    assert lancedb.memory_config_digest != mem0.memory_config_digest
    foreign = run_provenance("r3", provisioner_argv=("./their-provisioner",), provisioner_env={SYSTEM_ENV: "mem0"}, **common)  # type: ignore[arg-type]
    assert foreign.adapter_config is None
    assert run_provenance("r4", **common).adapter_config == adapter_config("reference", "hashed")  # type: ignore[arg-type]
