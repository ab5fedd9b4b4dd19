"""The offline retrieval suite: authored cases, ranking metrics, automatic-injection policy, gates.

Entry point: `run_retrieval_suite(adapter_factory, cases, gates) -> RetrievalResult`.
"""

from tasks_lib.suites.retrieval.cases import CaseSet, load_case_set
from tasks_lib.suites.retrieval.gates import RetrievalGates, load_gates
from tasks_lib.suites.retrieval.result import RetrievalResult
from tasks_lib.suites.retrieval.suite import Prices, bundled_cases, run_retrieval_suite

__all__ = ["CaseSet", "Prices", "RetrievalGates", "RetrievalResult", "bundled_cases", "load_case_set", "load_gates", "run_retrieval_suite"]
