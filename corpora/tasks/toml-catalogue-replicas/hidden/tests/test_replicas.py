"""Judged apart: the writer (and the toml library the project uses) run in the jail; the parsed
limits come back here and are compared here."""

import unittest

from jail import call


def limits_of(values: dict) -> dict:
    return call("toml:loads", call("svcconf.writer:render", values))["limits"]


class ReplicasTests(unittest.TestCase):
    def test_replicas_default_from_the_catalogue_docs(self):
        self.assertEqual(limits_of({"name": "a", "owner": "b"})["replicas"], 3)

    def test_replicas_from_the_entry(self):
        self.assertEqual(limits_of({"name": "a", "owner": "b", "replicas": 5}), {"cpu": 1, "memory_mb": 512, "replicas": 5})


if __name__ == "__main__":
    unittest.main()
