"""Reading the fence's configuration: a file of its own, or a run config's `budget:` section
(inline settings, or `config: <file>` naming a budget file relative to the run config)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from tasks_lib.budget.contracts import BudgetConfig
from tasks_lib.budget.errors import BudgetConfigError
from tasks_lib.contracts import SCHEMA_VERSION, parse_document

BUDGET_SECTION = "budget"


def _read(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise BudgetConfigError(f"{path}: budget configuration file does not exist") from None
    except (OSError, UnicodeDecodeError) as error:
        raise BudgetConfigError(f"{path}: cannot be read as UTF-8 text ({error})") from None
    try:
        return json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError) as error:
        raise BudgetConfigError(f"{path}: not valid {'JSON' if path.suffix == '.json' else 'YAML'}: {error}") from None


def load_budget_config(path: Path) -> BudgetConfig:
    """Read `path` (YAML or JSON) and return the budget settings; a relative `ledger_path` is
    resolved against the folder of the file that holds it.

    Raises BudgetConfigError for an unreadable file or one without budget settings, and
    ContractError (naming the file and each wrong field) for invalid settings."""
    data = _read(path)
    source = str(path)
    if isinstance(data, dict) and BUDGET_SECTION in data:
        section = data[BUDGET_SECTION]
        if isinstance(section, dict) and set(section) == {"config"}:
            if not isinstance(section["config"], str) or not section["config"]:
                raise BudgetConfigError(f"{path}: field 'budget.config' must name a budget configuration file")
            return load_budget_config(path.parent / section["config"])
        if section is None:
            raise BudgetConfigError(f"{path}: field 'budget' is empty; give the budget settings or 'config: <file>'")
        data, source = section, f"{path}: section '{BUDGET_SECTION}'"
    if not isinstance(data, dict):
        raise BudgetConfigError(f"{source}: expected a mapping of budget settings (provider, key_env, key_sha256, ...)")
    config = parse_document(BudgetConfig, {"schema_version": SCHEMA_VERSION, **data}, source)
    if config.ledger_path and not Path(config.ledger_path).is_absolute():
        config = config.model_copy(update={"ledger_path": str((path.parent / config.ledger_path).resolve())})
    return config
