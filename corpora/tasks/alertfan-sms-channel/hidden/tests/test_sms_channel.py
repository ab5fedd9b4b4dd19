"""Judged apart: alertfan runs in the jail; routes and the texts it sent come back here and are
compared here."""

import json
import os
import unittest

from jail import call, folder, get, new, value


def alert():
    return new("alertfan.alert:Alert", title="disk full on db-2", body="x" * 400, severity="critical", source="diskwatch")


class SmsChannelTest(unittest.TestCase):
    def test_a_route_file_keeps_sms(self) -> None:
        path = os.path.join(folder(), "routes.json")
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(json.dumps({"critical": ["sms", "email"]}))
        self.assertEqual(call("alertfan.config:load_routes", new("pathlib:Path", path)), {"critical": ["sms", "email"]})

    def test_sms_is_sent_short_and_names_the_alert(self) -> None:
        texts = new("builtins:list")
        used = call("alertfan.dispatch:dispatch", alert(), {"critical": ["sms"]}, {"sms": get(texts, "append")})
        self.assertEqual(used, ["sms"])
        sent = value(texts)
        self.assertEqual(len(sent), 1)
        self.assertLessEqual(len(sent[0]), 160)
        self.assertIn("disk full on db-2", sent[0])


if __name__ == "__main__":
    unittest.main()
