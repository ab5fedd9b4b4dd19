"""The offline retrieval suite: authored cases, ranking metrics, automatic-injection policy, gates.

Entry point: `run_retrieval_suite(adapter_factory, cases, gates) -> RetrievalResult`.
"""

from tasks_lib.retrieval.cases import CaseSet, load_case_set
from tasks_lib.retrieval.gates import RetrievalGates, load_gates
from tasks_lib.retrieval.result import RetrievalResult
from tasks_lib.retrieval.suite import Prices, bundled_cases, run_retrieval_suite

__all__ = ["CaseSet", "Prices", "RetrievalGates", "RetrievalResult", "bundled_cases", "load_case_set", "load_gates", "run_retrieval_suite"]
