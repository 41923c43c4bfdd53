"""Handlers for tests/worker/test_output.py: a handler that writes to stdout and stderr
every way a handler can (print, the descriptors, C's stdio, a program it starts)."""
import ctypes
import os
import subprocess
import sys

import prefork

LIBC = ctypes.CDLL(None)


@prefork.handler("output.print")
def write_everywhere(job):
    tag = job.payload["tag"]
    print(f"{tag} printed")
    print(f"{tag} to stderr", file=sys.stderr)
    os.write(1, f"{tag} on descriptor 1\n".encode())
    LIBC.puts(f"{tag} from C".encode())   # C's stdio: buffered until flushed
    subprocess.run(["/bin/sh", "-c", f"echo '{tag} from a program'; echo '{tag} program err' >&2"],
                   check=True)
    print(f"{tag} without newline", end="")


@prefork.handler("output.flood")
def flood(job):
    """payload['lines'] lines, one overlong line, then payload['after'] lines more."""
    for number in range(job.payload["lines"]):
        print(f"line {number}")
    print("x" * 5000)
    for _ in range(job.payload["after"]):
        print("after")


@prefork.handler("output.fail")
def fail(job):
    print(f"{job.payload['tag']} before failing", end="")
    raise ValueError("failed after printing")
