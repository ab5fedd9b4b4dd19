import json
import tempfile
import unittest
from pathlib import Path

from alertfan.alert import Alert
from alertfan.config import load_routes
from alertfan.dispatch import dispatch

ALERT = Alert(title="disk full on db-2", body="x" * 400, severity="critical", source="diskwatch")


class SmsChannelTest(unittest.TestCase):
    def test_a_route_file_keeps_sms(self) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "routes.json"
            path.write_text(json.dumps({"critical": ["sms", "email"]}))
            self.assertEqual(load_routes(path), {"critical": ["sms", "email"]})

    def test_sms_is_sent_short_and_names_the_alert(self) -> None:
        texts: list[str] = []
        used = dispatch(ALERT, {"critical": ["sms"]}, {"sms": texts.append})
        self.assertEqual(used, ["sms"])
        self.assertEqual(len(texts), 1)
        self.assertLessEqual(len(texts[0]), 160)
        self.assertIn("disk full on db-2", texts[0])


if __name__ == "__main__":
    unittest.main()
