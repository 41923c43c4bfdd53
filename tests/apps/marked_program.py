"""A program for command jobs, run as `python marked_program.py LOG SECONDS`: appends
"start JOB_ID TYPE - PID TIME" to LOG, sleeps SECONDS, appends the same "end" line,
also when SIGTERM stops it (the lines of limits_app.logged_run, so that one reader
reads both)."""
import os
import signal
import sys
import time

from limits_app import append


def main():
    log, seconds = sys.argv[1], float(sys.argv[2])
    fields = f"{os.environ['PREFORK_JOB_ID']} {os.environ['PREFORK_JOB_TYPE']} -"
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(1))
    append(log, f"start {fields} {os.getpid()} {time.time():.6f}")
    try:
        time.sleep(seconds)
    finally:
        append(log, f"end {fields} {os.getpid()} {time.time():.6f}")


if __name__ == "__main__":
    main()
