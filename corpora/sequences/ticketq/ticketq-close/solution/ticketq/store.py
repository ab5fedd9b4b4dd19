"""The ticket file: a JSON list of {"id", "title", "status"} objects."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path


@dataclass
class Ticket:
    id: int
    title: str
    status: str = "open"


def load(path: Path) -> list[Ticket]:
    if not path.exists():
        return []
    return [Ticket(**row) for row in json.loads(path.read_text(encoding="utf-8"))]


def save(path: Path, tickets: list[Ticket]) -> None:
    path.write_text(json.dumps([asdict(t) for t in tickets], indent=2) + "\n", encoding="utf-8")


def find(tickets: list[Ticket], ticket_id: int) -> Ticket:
    for ticket in tickets:
        if ticket.id == ticket_id:
            return ticket
    raise KeyError(ticket_id)


def next_id(tickets: list[Ticket]) -> int:
    return max((t.id for t in tickets), default=0) + 1


def label(ticket_id: int) -> str:
    """A ticket id as people search for it."""
    return f"TQ-{ticket_id:06d}"
