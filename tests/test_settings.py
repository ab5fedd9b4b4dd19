"""The `MEMTRIAL_*` settings: each variable declared and documented once, in `tasks_lib.settings`, and
read only through it, at call time."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tasks_lib import settings
from tasks_lib.settings import ALLOW_UNSANDBOXED_CHECK, ARTIFACT_ROOT, HOME, SETTINGS, Setting

ROOT = Path(__file__).resolve().parent.parent
SETTINGS_MODULE = ROOT / "tasks_lib" / "settings.py"
NAME = re.compile(r"MEMTRIAL_[A-Z0-9_]*")


def _code_files() -> list[Path]:
    return [path for folder in ("tasks_lib", "flows") for path in sorted((ROOT / folder).rglob("*.py"))]


def test_no_module_spells_a_memtrial_variable_outside_the_settings_module() -> None:
    """A name spelled again (`os.environ.get("MEMTRIAL_X")`, `X_ENV = "MEMTRIAL_X"`, `"MEMTRIAL_" + name`)
    is a reader the settings module does not know of: undocumented, and left behind by a rename."""
    spelled = [f"{path.relative_to(ROOT)}:{node.lineno}: {node.value}"
               for path in _code_files() if path != SETTINGS_MODULE
               for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
               if isinstance(node, ast.Constant) and isinstance(node.value, str) and NAME.fullmatch(node.value)]
    assert not spelled, f"declare the variable in tasks_lib/settings.py and read it through its Setting: {spelled}"


def test_every_variable_the_code_mentions_is_a_declared_setting() -> None:
    """A message or docstring naming a variable that nothing reads (a typo, a removed setting) sends the
    user to set something that has no effect."""
    declared = {setting.name for setting in SETTINGS}
    unknown = sorted({f"{path.relative_to(ROOT)}: {name}" for path in _code_files()
                      for name in NAME.findall(path.read_text(encoding="utf-8"))
                      if name not in declared | {settings.PREFIX} and not name.startswith(settings.SECRET_REFERENCE_PREFIX)})
    assert not unknown, f"these names are not in tasks_lib/settings.py: {unknown}"


def test_every_setting_is_one_distinct_documented_name() -> None:
    """Two settings sharing a name would give one variable two meanings; one without a doc is documented nowhere."""
    module_settings = [value for value in vars(settings).values() if isinstance(value, Setting)]
    assert sorted(s.name for s in module_settings) == sorted(s.name for s in SETTINGS), "SETTINGS must list every Setting once"
    assert len({s.name for s in SETTINGS}) == len(SETTINGS)
    for setting in SETTINGS:
        assert NAME.fullmatch(setting.name) and setting.name != settings.PREFIX, setting
        assert len(setting.doc.split()) >= 5, f"{setting.name}: say what it sets and its default"


def test_a_setting_is_read_when_asked_not_when_imported(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A value cached at import would ignore a variable a test, a worker or the CLI sets afterwards."""
    monkeypatch.delenv(ARTIFACT_ROOT.name, raising=False)
    monkeypatch.setenv(HOME.name, str(tmp_path / "home"))
    assert settings.memtrial_home() == (tmp_path / "home").resolve()
    assert settings.default_artifact_root() == str((tmp_path / "home").resolve() / "artifacts")
    monkeypatch.setenv(ARTIFACT_ROOT.name, "s3://bucket/prefix")
    assert settings.default_artifact_root() == "s3://bucket/prefix"
    monkeypatch.setenv(HOME.name, "")
    assert settings.memtrial_home() == (settings.CHECKOUT_ROOT / ".memtrial").resolve(), "an empty value counts as unset"


@pytest.mark.parametrize("value", ["true", "yes", "on", "01", " 1", "1 ", "0", ""])
def test_an_opt_out_is_not_switched_on_by_a_value_other_than_1(value: str) -> None:
    """`MEMTRIAL_ALLOW_UNSANDBOXED_CHECK=true` must not run checks unsandboxed: only `1` opts out."""
    assert not ALLOW_UNSANDBOXED_CHECK.flag({ALLOW_UNSANDBOXED_CHECK.name: value})
    assert ALLOW_UNSANDBOXED_CHECK.flag({ALLOW_UNSANDBOXED_CHECK.name: "1"})


def test_a_setting_reads_the_mapping_it_is_given_not_the_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """A provisioner's configured environment is read as given; the runner's own variable must not leak in."""
    monkeypatch.setenv(settings.PROVISIONER_STATE.name, "/runner/state")
    assert settings.PROVISIONER_STATE.text({}) == ""
    assert settings.PROVISIONER_STATE.text({settings.PROVISIONER_STATE.name: "/prov"}) == "/prov"


def test_importing_the_settings_loads_only_the_standard_library() -> None:
    """Provisioner verbs and sandboxed checks read settings in processes kept light (no pydantic, no Prefect)."""
    probe = ("import sys; before = set(sys.modules); import tasks_lib.settings; "
             "print(sorted(m for m in set(sys.modules) - before if m.split('.')[0] not in ('tasks_lib',) "
             "and m.split('.')[0] in ('pydantic', 'prefect', 'numpy', 'yaml', 'typer')))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=ROOT)
    assert done.stdout.strip() == "[]", done.stdout


def test_the_checkout_root_is_derived_once() -> None:
    """Four copies of `Path(__file__).parents[n]` each break differently when a module moves."""
    derived = [f"{path.relative_to(ROOT)}:{node.lineno}" for path in _code_files() if path != SETTINGS_MODULE
               for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
               if isinstance(node, ast.Attribute) and node.attr == "parents"
               and "__file__" in ast.unparse(node.value)]
    assert not derived, f"use tasks_lib.settings.CHECKOUT_ROOT: {derived}"
    assert (settings.CHECKOUT_ROOT / "corpora").is_dir() and (settings.CHECKOUT_ROOT / "pyproject.toml").is_file()
