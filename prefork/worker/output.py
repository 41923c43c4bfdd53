"""A worker child's own stdout and stderr as log events: what a handler prints, what C
code writes, what a program it starts writes to descriptors 1 and 2 is logged line by
line as job_output events that name the job the child was running.

At its start (capture()) the child makes its descriptors 1 and 2 the write ends of
two pipes, which a thread of its own reads. The log keeps writing where stderr went
before, through a descriptor of its own: an event never feeds the pipe it came from.
A job's output is settled when the next job starts, when the child goes idle and
when it exits (release()): Python's and C's buffers flushed, what the pipes hold
read, a last line without a newline logged. Lines follow output_lines.py, as a
command job's program's do: cut at a bounded length, a bounded number per job.

What the reader thread has not read yet when the child is killed outright (SIGKILL,
os._exit() in a handler) is lost with it; sys.stdout is line buffered, so a whole
line reaches the pipe, and the reader, as soon as it is printed.
"""
import _thread
import ctypes
import logging
import os
import select
import signal
import sys
import threading
from typing import IO, Any, Callable, Iterable, Optional

from ..jobs import Job
from ..logs import LOGGER
from .output_lines import STREAMS, OutputLog

DESCRIPTORS = dict(zip((1, 2), STREAMS))   # descriptor -> stream name
READ_SIZE = 65536
# Reads of one pipe a settling makes at most: a program of the job that floods the
# pipe must not hold the worker; what it writes on is logged by the reader thread.
MAX_SETTLE_READS = 16

_capture: Optional["Capture"] = None


def capture() -> None:
    """From now on, log what this process writes to its descriptors 1 and 2 (a worker
    child, at its start)."""
    global _capture
    _capture = Capture()


def running(job: Optional[Job]) -> None:
    """What is written from now on is `job`'s (None: no job's); what was written until
    now is logged with the job before. Nothing when output is not captured."""
    if _capture is not None:
        _capture.switch(job)


def release() -> None:
    """Log the last of the output: the process is about to exit."""
    if _capture is not None:
        _capture.switch(None)


class Capture:
    """The pipes behind descriptors 1 and 2, the thread that reads them, and the log
    of the job they are written for."""

    def __init__(self) -> None:
        self.lock = threading.Lock()   # one reader at a time: the thread, or a settling
        self.log = job_log(None)
        _log_to(os.dup(2))
        self.pipes: dict[int, str] = {}   # read end -> stream name
        for fd, stream in DESCRIPTORS.items():
            read_end, write_end = os.pipe()
            os.dup2(write_end, fd)   # inheritable: the programs a handler starts write here too
            os.close(write_end)
            os.set_blocking(read_end, False)
            self.pipes[read_end] = stream
        self.waiting = _poller(self.pipes)   # a settling's look at what waits in the pipes
        # New objects, line buffered: a line printed reaches the pipe at once, and what
        # the parent had buffered in the inherited ones is not written a second time.
        sys.stdout = _line_buffered(1, sys.stdout)
        sys.stderr = _line_buffered(2, sys.stderr)
        # A bare thread, as the title's ticker (supervisor/child.py): cheap to start in a
        # child forked per job; nobody joins it, the child ends with os._exit.
        _thread.start_new_thread(self.read_forever, ())

    def read_forever(self) -> None:
        # The child's signals are the main thread's: none may interrupt us instead.
        signal.pthread_sigmask(signal.SIG_BLOCK, signal.valid_signals())
        poller = _poller(self.pipes)
        while True:
            for fd, _ in poller.poll():
                with self.lock:
                    if fd in self.pipes:
                        self.read(fd)
                    if fd not in self.pipes:   # closed for good (by us or a settling)
                        poller.unregister(fd)

    def read(self, fd: int) -> int:
        """One read of a pipe into the log; the bytes read (0: nothing waiting, or the
        pipe closed for good, as when a handler closed the descriptor: finished)."""
        try:
            chunk = os.read(fd, READ_SIZE)
        except BlockingIOError:
            return 0
        stream = self.pipes[fd]
        if chunk:
            self.log.feed(stream, chunk)
        else:
            self.log.finish(stream)
            del self.pipes[fd]
        return len(chunk)

    def switch(self, job: Optional[Job]) -> None:
        """Settle the output written until now with the current job, then log what
        follows with `job`."""
        _flush_buffers()
        with self.lock:
            for fd, _ in self.waiting.poll(0):
                self.drain(fd)
            for stream in STREAMS:
                self.log.finish(stream)
            self.log.report_dropped()
            self.log = job_log(job)

    def drain(self, fd: int) -> None:
        """Read what the pipe holds (at most MAX_SETTLE_READS reads); forget a pipe
        closed for good (by this read or the reader thread's)."""
        for _ in range(MAX_SETTLE_READS):
            if fd not in self.pipes or self.read(fd) < READ_SIZE:
                break
        if fd not in self.pipes:
            self.waiting.unregister(fd)


def job_log(job: Optional[Job]) -> OutputLog:
    fields = {} if job is None else {"job_id": job.id, "type": job.type}
    return OutputLog(fields, command=False)


def _log_to(fd: int) -> None:
    """Point the package's log handlers that write to descriptor 1 or 2 at `fd` (where
    stderr went), so that an event is never written into the pipes it is read from."""
    stream = open(fd, "w", encoding="utf-8", errors="backslashreplace")
    for handler in LOGGER.handlers:
        if isinstance(handler, logging.StreamHandler) and \
                _descriptor(handler.stream) in DESCRIPTORS:
            handler.setStream(stream)


def _descriptor(stream: Any) -> Optional[int]:
    try:
        return int(stream.fileno())
    except (AttributeError, OSError, ValueError):   # not backed by a descriptor, or closed
        return None


def _line_buffered(fd: int, old: Optional[IO[str]]) -> IO[str]:
    """A line-buffered text stream on descriptor `fd`, encoded as `old` was."""
    return open(fd, "w", buffering=1, closefd=False,
                encoding=getattr(old, "encoding", None) or "utf-8",
                errors=getattr(old, "errors", None) or "backslashreplace")


def _poller(fds: Iterable[int]) -> "select.poll":
    poller = select.poll()
    for fd in fds:
        poller.register(fd, select.POLLIN)
    return poller


def _c_fflush() -> Optional[Callable[[Optional[int]], int]]:
    """libc's fflush, whose fflush(NULL) writes out C's stdio buffers (a C extension's
    printf), or None where libc cannot be found."""
    try:
        fflush: Callable[[Optional[int]], int] = ctypes.CDLL(None).fflush
    except (OSError, AttributeError):
        return None
    return fflush


# Looked up once, at import in the parent: not anew in each child forked per job.
FFLUSH = _c_fflush()


def _flush_buffers() -> None:
    """Write out what C's stdio, and Python's sys.stdout and sys.stderr, hold. C's
    first: it may hold whole lines written long ago, Python's (line buffered) only
    the start of a line."""
    if FFLUSH is not None:
        FFLUSH(None)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:   # a stream a handler replaced or broke is not ours to mend
            pass
