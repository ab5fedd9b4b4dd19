"""Retrieval suites on public conversational-memory data: LongMemEval and LoCoMo.

`run_locomo(path, adapter_factory)` / `run_longmemeval(paths, adapter_factory)` return a
`PublicResult`; the adapters (`locomo`, `longmemeval`) turn each file into isolated evaluation
groups with counted quirk rules; `metrics` holds LongMemEval's official metric definitions.
"""

from tasks_lib.suites.public.result import PublicResult
from tasks_lib.suites.public.runner import registry_factory, run_locomo, run_longmemeval

__all__ = ["PublicResult", "registry_factory", "run_locomo", "run_longmemeval"]
