import unittest

from api.compat import client_supported


class SupportWindowTests(unittest.TestCase):
    def test_clients_within_the_window(self):
        self.assertTrue(client_supported("3.7.0", "3.5.0"))
        self.assertTrue(client_supported("3.7.2", "3.6.9"))
        self.assertTrue(client_supported("3.7.0", "3.9.1"))

    def test_clients_behind_the_window(self):
        self.assertFalse(client_supported("3.7.0", "3.4.9"))
        self.assertFalse(client_supported("3.7.0", "3.0.0"))

    def test_other_major_still_refused(self):
        self.assertFalse(client_supported("3.7.0", "2.7.0"))


if __name__ == "__main__":
    unittest.main()
