"""Judged apart: the writer (and the toml library the project uses) run in the jail; the rendered
text and its parsed form come back here and are compared here."""

import unittest

from jail import call


def render(values: dict) -> str:
    return call("svcconf.writer:render", values)


class ValidatorMarkerTests(unittest.TestCase):
    def test_generated_file_starts_with_the_format_marker(self):
        text = render({"name": "billing", "owner": "payments"})
        self.assertEqual(text.splitlines()[0], 'config_format = "svc/2"')
        self.assertEqual(call("toml:loads", text)["config_format"], "svc/2")

    def test_tables_unchanged(self):
        doc = call("toml:loads", render({"name": "billing", "owner": "payments", "memory_mb": 1024}))
        self.assertEqual(doc["limits"], {"cpu": 1, "memory_mb": 1024})


if __name__ == "__main__":
    unittest.main()
