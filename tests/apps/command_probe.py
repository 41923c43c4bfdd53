"""A program for command-job tests, run as `python command_probe.py MODE RECORD ARGS...`.

It writes its argv (after MODE and RECORD), pid and job environment to the
JSON file RECORD, prints a marker line on stdout and on stderr, then:
    ok          exit 0
    fail        exit 1
    tempfail    exit 75 the first time (RECORD exists afterwards), then 0
    hang        sleep for a minute (the timeout kills it)
    selfkill    SIGKILL itself
    chatter     print one 5000-character line and 2000 short ones, then exit 0
"""
import json
import os
import signal
import sys
import time


def main():
    mode, record = sys.argv[1], sys.argv[2]
    first_run = not os.path.exists(record)
    with open(record, "w") as handle:
        json.dump({"args": sys.argv[3:], "pid": os.getpid(),
                   "job_id": os.environ.get("PREFORK_JOB_ID"),
                   "leaked": sorted(k for k in os.environ if k.startswith("PREFORK_QUEUE_"))},
                  handle)
    print(f"probe-stdout {mode} pid {os.getpid()}", flush=True)
    print(f"probe-stderr {mode}", file=sys.stderr, flush=True)
    if mode == "fail":
        sys.exit(1)
    if mode == "tempfail" and first_run:
        sys.exit(75)
    if mode == "hang":
        time.sleep(60)
    if mode == "selfkill":
        os.kill(os.getpid(), signal.SIGKILL)
    if mode == "chatter":
        print("x" * 5000)
        for number in range(2000):
            print(f"chatter line {number}")
    sys.exit(0)


if __name__ == "__main__":
    main()
