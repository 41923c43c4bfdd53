"""Waiting for a condition with a deadline (never a bare sleep), for the tests and
for the soak script, which runs without pytest."""
import time


def poll_until(predicate, timeout, interval=0.05, message="condition", error=TimeoutError):
    """Poll predicate() until it returns a truthy value, which is returned; raise
    `error` once `timeout` seconds have passed without one."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise error(f"timed out after {timeout:g}s waiting for {message}")
        time.sleep(interval)
