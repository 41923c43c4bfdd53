"""A self-pipe: signal handlers write a byte, the main loop sleeps on the other end.

time.sleep() resumes after a signal handler returns (PEP 475), so a loop that
must wake on a signal sleeps in select() on this pipe instead.
"""
import os
import select


class Waker:
    def __init__(self):
        self.read_fd, self.write_fd = os.pipe()
        os.set_blocking(self.read_fd, False)
        os.set_blocking(self.write_fd, False)

    def wake(self):
        """Safe inside a signal handler: one non-blocking write, errors ignored."""
        try:
            os.write(self.write_fd, b"!")
        except OSError:  # pipe full: a wake-up is already pending
            pass

    def sleep(self, seconds):
        """Sleep up to `seconds`; return early (True) when woken."""
        ready, _, _ = select.select([self.read_fd], [], [], max(0.0, seconds))
        if ready:
            self._drain()
        return bool(ready)

    def _drain(self):
        try:
            while os.read(self.read_fd, 4096):
                pass
        except BlockingIOError:
            pass

    def close(self):
        os.close(self.read_fd)
        os.close(self.write_fd)
