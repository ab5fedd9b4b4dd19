"""Judged apart: the Node module runs in the jail (harness/shim.cjs); its answers come back as JSON
and are compared here with literals (never asking the jail to compare)."""

import unittest

from jail import call, get, new, value


class PartnerTimestampsTest(unittest.TestCase):
    def test_every_item_carries_the_publication_time_in_epoch_seconds_for_the_partner(self) -> None:
        published_at = new("globalThis:Date", "2024-05-01T08:00:00Z")
        feed = call("lib/feed:buildFeed", {
            "title": "News", "homePageUrl": "https://news.test",
            "articles": [{"id": 7, "url": "https://news.test/x", "title": "X", "body": "b", "status": "published",
                          "publishedAt": published_at}],
        })
        item = value(get(get(feed, "items"), "0"))
        self.assertIs(type(item["published_ts"]), int)
        self.assertEqual(item["published_ts"], 1714550400)
        self.assertEqual(item["date_published"], "2024-05-01T08:00:00.000Z")


if __name__ == "__main__":
    unittest.main()
