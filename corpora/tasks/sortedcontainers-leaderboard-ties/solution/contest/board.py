"""The contest leaderboard: best score first."""

from dataclasses import dataclass

from sortedcontainers import SortedKeyList


@dataclass(frozen=True)
class Entry:
    team: str
    score: int
    submitted_at: float


class Leaderboard:
    def __init__(self):
        self._entries = SortedKeyList(key=lambda entry: (-entry.score, entry.submitted_at))

    def submit(self, entry):
        self._entries.add(entry)

    def top(self, n):
        """The first `n` teams, in rank order."""
        return [entry.team for entry in self._entries[:n]]
