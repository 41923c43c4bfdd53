"""A self-pipe: signal handlers write a byte, the main loop sleeps on the other end.

time.sleep() resumes after a signal handler returns (PEP 475), so a loop that
must wake on a signal sleeps in select() on this pipe instead.
"""
import os
import select


class Waker:
    def __init__(self, extra_fd: int | None = None, data_fd: int | None = None) -> None:
        """extra_fd: another pipe whose bytes also wake us (the parent's, in a child).
        data_fd: a pipe whose data wakes us and is left for its reader (the jobs the
        parent hands a child)."""
        self.read_fd, self.write_fd = os.pipe()
        self.drained = [self.read_fd] + ([extra_fd] if extra_fd is not None else [])
        self.watched = self.drained + ([data_fd] if data_fd is not None else [])
        for fd in self.watched + [self.write_fd]:
            os.set_blocking(fd, False)

    def wake(self) -> None:
        """Safe inside a signal handler: one non-blocking write, errors ignored."""
        try:
            os.write(self.write_fd, b"!")
        except OSError:  # pipe full: a wake-up is already pending
            pass

    def sleep(self, seconds: float) -> bool:
        """Sleep up to `seconds`; return early (True) when woken."""
        ready, _, _ = select.select(self.watched, [], [], max(0.0, seconds))
        for fd in ready:
            if fd in self.drained:
                _drain(fd)
        return bool(ready)

    def close(self) -> None:
        os.close(self.read_fd)
        os.close(self.write_fd)


def _drain(fd: int) -> None:
    try:
        while os.read(fd, 4096):
            pass
    except BlockingIOError:
        pass
