"""Judged apart: logvault runs in the jail with a recording client; the bucket it used comes back
here and is compared here."""

import unittest

from jail import call, get, new, recorder, value


class CurrentBucketTest(unittest.TestCase):
    def test_default_bucket_is_the_cold_store(self) -> None:
        settings = call("logvault.settings:Settings.from_env", {})
        self.assertEqual(get(settings, "bucket"), "acme-cold-store-eu")
        client = recorder()
        url = call("logvault.archive:upload", settings, client, "web-1", new("datetime:date", 2024, 3, 9), [])
        self.assertEqual([c["kwargs"].get("Bucket") for c in value(client) if c["name"] == "put_object"], ["acme-cold-store-eu"])
        self.assertTrue(url.startswith("s3://acme-cold-store-eu/"))

    def test_environment_still_overrides(self) -> None:
        settings = call("logvault.settings:Settings.from_env", {"LOGVAULT_BUCKET": "scratch"})
        self.assertEqual(get(settings, "bucket"), "scratch")
