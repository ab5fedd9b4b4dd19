"""Judged apart: the invoice runs in the jail; amounts come back as text and are compared here."""

import unittest
from decimal import Decimal

from jail import call, get, new


def amount(invoice, name: str) -> Decimal:
    return Decimal(call("builtins:str", get(invoice, name)))


class TaxTest(unittest.TestCase):
    def invoice(self, rate: str, amount: str):
        invoice = new("invoicer.invoice:Invoice", "acme", new("decimal:Decimal", rate))
        call(get(invoice, "add"), "service", "1", amount)
        return invoice

    def test_tax_is_rounded_half_to_even_like_every_amount(self) -> None:
        self.assertEqual(amount(self.invoice("0.1", "0.25"), "tax"), Decimal("0.02"))
        self.assertEqual(amount(self.invoice("0.1", "0.35"), "tax"), Decimal("0.04"))
        self.assertEqual(amount(self.invoice("0.5", "0.05"), "tax"), Decimal("0.02"))

    def test_total_is_subtotal_plus_tax(self) -> None:
        invoice = self.invoice("0.2", "10.00")
        self.assertEqual((amount(invoice, "tax"), amount(invoice, "total")), (Decimal("2.00"), Decimal("12.00")))


if __name__ == "__main__":
    unittest.main()
