"""Reading the fence's configuration: a file of its own or the `budget:` section of a run config."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from tasks_lib.budget.contracts import BudgetConfig
from tasks_lib.budget.errors import BudgetConfigError
from tasks_lib.contracts import SCHEMA_VERSION, parse_document

BUDGET_SECTION = "budget"


def load_budget_config(path: Path) -> BudgetConfig:
    """Read `path` (YAML or JSON); use its `budget:` section when it has one.

    Raises BudgetConfigError for an unreadable file or one without budget settings, and
    ContractError (naming the file and each wrong field) for invalid settings."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise BudgetConfigError(f"{path}: budget configuration file does not exist") from None
    except (OSError, UnicodeDecodeError) as error:
        raise BudgetConfigError(f"{path}: cannot be read as UTF-8 text ({error})") from None
    try:
        data = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError) as error:
        raise BudgetConfigError(f"{path}: not valid {'JSON' if path.suffix == '.json' else 'YAML'}: {error}") from None
    if isinstance(data, dict) and BUDGET_SECTION in data:
        data = data[BUDGET_SECTION]
        source = f"{path}: section '{BUDGET_SECTION}'"
    else:
        source = str(path)
    if not isinstance(data, dict):
        raise BudgetConfigError(f"{source}: expected a mapping of budget settings (provider, key_env, key_sha256, ...)")
    return parse_document(BudgetConfig, {"schema_version": SCHEMA_VERSION, **data}, source)
