"""A one-line progress bar on stderr, drawn only when stderr is a terminal."""
import sys


class Progress:
    def __init__(self, total, label, stream=None):
        self.total, self.label = total, label
        self.stream = stream or sys.stderr
        self.enabled = self.stream.isatty() and total > 0
        self.done = 0

    def advance(self, count):
        self.done += count
        if self.enabled:
            width = 30
            filled = int(width * self.done / self.total)
            self.stream.write(f"\r{self.label} [{'#' * filled}{'.' * (width - filled)}] "
                              f"{self.done}/{self.total}")
            self.stream.flush()

    def finish(self):
        if self.enabled:
            self.stream.write("\n")
            self.stream.flush()
