import unittest
from decimal import Decimal

from invoicer.invoice import Invoice


class TaxTest(unittest.TestCase):
    def invoice(self, rate: str, amount: str) -> Invoice:
        invoice = Invoice("acme", Decimal(rate))
        invoice.add("service", "1", amount)
        return invoice

    def test_tax_is_rounded_half_to_even_like_every_amount(self) -> None:
        self.assertEqual(self.invoice("0.1", "0.25").tax, Decimal("0.02"))
        self.assertEqual(self.invoice("0.1", "0.35").tax, Decimal("0.04"))
        self.assertEqual(self.invoice("0.5", "0.05").tax, Decimal("0.02"))

    def test_total_is_subtotal_plus_tax(self) -> None:
        invoice = self.invoice("0.2", "10.00")
        self.assertEqual((invoice.tax, invoice.total), (Decimal("2.00"), Decimal("12.00")))


if __name__ == "__main__":
    unittest.main()
