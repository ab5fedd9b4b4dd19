"""An invoice: its lines, subtotal and tax."""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal

from invoicer.lines import Line
from invoicer.money import to_cents


@dataclass
class Invoice:
    customer: str
    tax_rate: Decimal
    lines: list[Line] = field(default_factory=list)

    def add(self, description: str, quantity: str, unit_price: str) -> None:
        self.lines.append(Line(description, Decimal(quantity), Decimal(unit_price)))

    @property
    def subtotal(self) -> Decimal:
        return sum((line.amount for line in self.lines), Decimal("0.00"))

    @property
    def tax(self) -> Decimal:
        return to_cents(self.subtotal * self.tax_rate)

    @property
    def total(self) -> Decimal:
        return self.subtotal + self.tax
