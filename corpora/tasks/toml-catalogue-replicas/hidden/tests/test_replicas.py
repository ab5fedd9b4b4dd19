import unittest

import toml

from svcconf.writer import render


class ReplicasTests(unittest.TestCase):
    def test_replicas_default_from_the_catalogue_docs(self):
        self.assertEqual(toml.loads(render({"name": "a", "owner": "b"}))["limits"]["replicas"], 3)

    def test_replicas_from_the_entry(self):
        limits = toml.loads(render({"name": "a", "owner": "b", "replicas": 5}))["limits"]
        self.assertEqual(limits, {"cpu": 1, "memory_mb": 512, "replicas": 5})


if __name__ == "__main__":
    unittest.main()
