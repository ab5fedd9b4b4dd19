"""Judged apart: the routes run in the jail; this test compares their answers here."""

import unittest

from jail import call


def item_path(model, ident):
    return call("api.routes:item_path", model, ident)


class ItemIdEncodingTests(unittest.TestCase):
    def test_ids_are_percent_encoded_as_one_segment(self):
        self.assertEqual(item_path("Invoice", "2024/07-0012"), "/invoices/2024%2F07-0012")
        self.assertEqual(item_path("Invoice", "a b?c"), "/invoices/a%20b%3Fc")

    def test_plain_ids_unchanged(self):
        self.assertEqual(item_path("OrderLine", 7), "/order_lines/7")


if __name__ == "__main__":
    unittest.main()
