import unittest

import toml

from svcconf.writer import render


class ValidatorMarkerTests(unittest.TestCase):
    def test_generated_file_starts_with_the_format_marker(self):
        text = render({"name": "billing", "owner": "payments"})
        self.assertEqual(text.splitlines()[0], 'config_format = "svc/2"')
        self.assertEqual(toml.loads(text)["config_format"], "svc/2")

    def test_tables_unchanged(self):
        doc = toml.loads(render({"name": "billing", "owner": "payments", "memory_mb": 1024}))
        self.assertEqual(doc["limits"], {"cpu": 1, "memory_mb": 1024})


if __name__ == "__main__":
    unittest.main()
