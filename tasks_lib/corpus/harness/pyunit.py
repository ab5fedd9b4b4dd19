"""Run one post-turn unittest file and write each case's outcome as JSON lines (standard library only).

Usage: `python3 -I -B pyunit.py REPORT tests/test_x.py`, with the workspace as cwd. The file is
loaded as a module of the workspace (`tests.test_x`, so `tests/__init__.py` and the project's own
modules import as the verifier sees them). Each line is {"case": "tests/test_x.py::Class.method",
"outcome": "pass" | "fail" | "error" | "skip"}. After the run it checks that the parts of unittest
that decide an outcome are still the originals and writes a {"flag": ...} line for each one code
under test replaced: a cheap detection of the in-process tampering no harness can prevent.
"""

from __future__ import annotations

import json
import os
import sys
import unittest

_WATCHED = {
    "unittest.TestCase.run": (unittest.TestCase, "run"),
    "unittest.TestCase.__call__": (unittest.TestCase, "__call__"),
    "unittest.TestSuite.run": (unittest.TestSuite, "run"),
    "unittest.TestResult.addFailure": (unittest.TestResult, "addFailure"),
    "unittest.TestResult.addError": (unittest.TestResult, "addError"),
}


class _Recorder(unittest.TestResult):
    """Keeps each case's outcome by its id."""

    def __init__(self) -> None:
        super().__init__()
        self.outcomes: dict[str, str] = {}

    def addSuccess(self, test: unittest.TestCase) -> None:  # noqa: N802 (unittest's name)
        self.outcomes.setdefault(test.id(), "pass")

    def addFailure(self, test: unittest.TestCase, err: object) -> None:  # noqa: N802
        self.outcomes[test.id()] = "fail"
        sys.stderr.write(f"FAIL {test.id()}\n{self._exc_info_to_string(err, test)}\n")  # type: ignore[attr-defined]  # private in typeshed

    def addError(self, test: unittest.TestCase, err: object) -> None:  # noqa: N802
        self.outcomes[test.id()] = "error"
        sys.stderr.write(f"ERROR {test.id()}\n{self._exc_info_to_string(err, test)}\n")  # type: ignore[attr-defined]  # private in typeshed

    def addSkip(self, test: unittest.TestCase, reason: str) -> None:  # noqa: N802
        self.outcomes[test.id()] = "skip"

    def addExpectedFailure(self, test: unittest.TestCase, err: object) -> None:  # noqa: N802
        self.outcomes[test.id()] = "fail"

    def addUnexpectedSuccess(self, test: unittest.TestCase) -> None:  # noqa: N802
        self.outcomes[test.id()] = "fail"

    def addSubTest(self, test: unittest.TestCase, subtest: unittest.TestCase, err: object) -> None:  # noqa: N802
        if err is not None:
            self.outcomes[test.id()] = "fail"


def main(report: str, path: str) -> int:
    """Load and run `path`; write its cases to `report`."""
    originals = {name: getattr(owner, attr) for name, (owner, attr) in _WATCHED.items()}
    sys.path.insert(0, os.getcwd())
    if "JAIL_SOCKET" in os.environ:  # a judged-apart test: its only way to the code is `jail`
        sys.path.append(os.path.dirname(os.path.abspath(__file__)))
    module = path.removesuffix(".py").replace("/", ".")
    recorder = _Recorder()
    unittest.defaultTestLoader.loadTestsFromName(module).run(recorder)
    prefix = module + "."
    with open(report, "w", encoding="utf-8") as handle:
        for case, outcome in recorder.outcomes.items():
            name = f"{path}::{case.removeprefix(prefix)}" if case.startswith(prefix) else case
            handle.write(json.dumps({"case": name, "outcome": outcome}) + "\n")
        for name, (owner, attr) in _WATCHED.items():
            if getattr(owner, attr) is not originals[name]:
                handle.write(json.dumps({"flag": f"{name} was replaced while the post-turn tests ran"}) + "\n")
        if sys.modules.get("unittest") is not unittest:
            handle.write(json.dumps({"flag": "the unittest module was replaced while the post-turn tests ran"}) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
