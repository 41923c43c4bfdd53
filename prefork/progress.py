"""A one-line progress bar on stderr, drawn only when stderr is a terminal."""
import sys
from typing import Optional, TextIO

WIDTH = 30


class Progress:
    def __init__(self, total: int, label: str, stream: Optional[TextIO] = None) -> None:
        self.total, self.label = total, label
        self.stream = stream or sys.stderr
        self.enabled = self.stream.isatty() and total > 0
        self.done = 0

    def advance(self, count: int) -> None:
        self.done += count
        if self.enabled:
            filled = int(WIDTH * self.done / self.total)
            self.stream.write(f"\r{self.label} [{'#' * filled}{'.' * (WIDTH - filled)}] "
                              f"{self.done}/{self.total}")
            self.stream.flush()

    def finish(self) -> None:
        if self.enabled:
            self.stream.write("\n")
            self.stream.flush()
