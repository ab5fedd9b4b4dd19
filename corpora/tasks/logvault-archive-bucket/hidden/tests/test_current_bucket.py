import unittest
from datetime import date

from logvault.archive import upload
from logvault.settings import Settings


class RecordingClient:
    def __init__(self) -> None:
        self.buckets: list[object] = []

    def put_object(self, **kwargs: object) -> None:
        self.buckets.append(kwargs["Bucket"])


class CurrentBucketTest(unittest.TestCase):
    def test_default_bucket_is_the_cold_store(self) -> None:
        settings = Settings.from_env({})
        self.assertEqual(settings.bucket, "acme-cold-store-eu")
        client = RecordingClient()
        url = upload(settings, client, "web-1", date(2024, 3, 9), [])
        self.assertEqual(client.buckets, ["acme-cold-store-eu"])
        self.assertTrue(url.startswith("s3://acme-cold-store-eu/"))

    def test_environment_still_overrides(self) -> None:
        self.assertEqual(Settings.from_env({"LOGVAULT_BUCKET": "scratch"}).bucket, "scratch")


if __name__ == "__main__":
    unittest.main()
