"""Output as log events, line by line: what a command job's program writes
(command_process.py) and what a worker child writes to its own stdout and stderr
(output.py) follow the same rules. Each line is one event, cut at MAX_LINE_BYTES,
control characters replaced; at most MAX_LINES are logged per job, the rest counted."""
import re
from collections.abc import Mapping

from ..events import Event
from ..logs import event

MAX_LINE_BYTES = 1000         # longer output lines are cut
MAX_LINES = 500               # output lines logged per job; the rest are counted
CONTROL_CHARS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
STREAMS = ("stdout", "stderr")


class OutputLog:
    """The output of one job (its stdout and stderr) as events with `fields` (which name
    the job): command_output and command_output_truncated for a command job's program
    (`command`), job_output and job_output_truncated for a worker child's own."""

    def __init__(self, fields: Mapping[str, object], command: bool) -> None:
        self.fields = dict(fields)
        self.command = command
        self.logged = self.dropped = 0
        self.pending = {stream: bytearray() for stream in STREAMS}
        self.cutting = {stream: False for stream in STREAMS}   # inside an overlong line

    def feed(self, stream: str, chunk: bytes) -> None:
        pending = self.pending[stream]
        pending += chunk
        while True:
            end = pending.find(b"\n")
            if end < 0:
                break
            line = bytes(pending[:end])
            del pending[:end + 1]
            if self.cutting[stream]:
                self.cutting[stream] = False   # the rest of a line already logged cut
            else:
                self._line(stream, line)
        if len(pending) > MAX_LINE_BYTES:
            if not self.cutting[stream]:
                self._line(stream, bytes(pending))
            self.cutting[stream] = True
            pending.clear()

    def finish(self, stream: str) -> None:
        """The stream ended: log its last line, if it had no newline."""
        pending = self.pending[stream]
        if pending and not self.cutting[stream]:
            self._line(stream, bytes(pending))
        pending.clear()
        self.cutting[stream] = False

    def report_dropped(self) -> None:
        if self.dropped:   # (the level None: the event's own, whatever the fields say)
            event(Event.COMMAND_OUTPUT_TRUNCATED if self.command
                  else Event.JOB_OUTPUT_TRUNCATED, None, **self.fields,
                  dropped_lines=self.dropped, max_lines=MAX_LINES)

    def _line(self, stream: str, raw: bytes) -> None:
        if self.logged >= MAX_LINES:
            self.dropped += 1
            return
        self.logged += 1
        fields: dict[str, bool] = {}
        if len(raw) > MAX_LINE_BYTES:
            raw, fields["truncated"] = raw[:MAX_LINE_BYTES], True
        text = CONTROL_CHARS.sub("?", raw.decode("utf-8", "replace").rstrip("\r"))
        event(Event.COMMAND_OUTPUT if self.command else Event.JOB_OUTPUT, None, **self.fields,
              stream=stream, line=text, **fields)
