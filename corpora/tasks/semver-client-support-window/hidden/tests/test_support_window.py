"""Judged apart: the compatibility rule runs in the jail; its answers are compared here."""

import unittest

from jail import call


def client_supported(server: str, client: str):
    return call("api.compat:client_supported", server, client)


class SupportWindowTests(unittest.TestCase):
    def test_clients_within_the_window(self):
        self.assertIs(client_supported("3.7.0", "3.5.0"), True)
        self.assertIs(client_supported("3.7.2", "3.6.9"), True)
        self.assertIs(client_supported("3.7.0", "3.9.1"), True)

    def test_clients_behind_the_window(self):
        self.assertIs(client_supported("3.7.0", "3.4.9"), False)
        self.assertIs(client_supported("3.7.0", "3.0.0"), False)

    def test_other_major_still_refused(self):
        self.assertIs(client_supported("3.7.0", "2.7.0"), False)


if __name__ == "__main__":
    unittest.main()
