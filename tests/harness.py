"""Running the real supervisor as a subprocess and watching it from outside."""
import json
import os
import signal
import subprocess
import sys
import time
from contextlib import contextmanager

import psutil
from conftest import cli_env, wait_until


class SupervisorProcess:
    """`python -m prefork run ...` with JSON logs captured to a file."""

    def __init__(self, tmp_path, dsn, *args, config_text=None, env=None, name="sup"):
        self.log_path = tmp_path / f"{name}.log"
        command = [sys.executable, "-m", "prefork", "run", "--log-format", "json", *args]
        if config_text is not None:
            self.config_path = tmp_path / f"{name}.conf"
            self.config_path.write_text(config_text)
            command += ["--config", str(self.config_path)]
        self.log_file = open(self.log_path, "w")
        self.proc = subprocess.Popen(command, stdout=self.log_file, stderr=subprocess.STDOUT,
                                     env=cli_env(dsn, **(env or {})), start_new_session=True)
        self.pid = self.proc.pid

    # -- reading the logs -------------------------------------------------------

    def events(self, name=None):
        found = []
        with open(self.log_path) as handle:
            for line in handle:
                line = line.strip()
                if not line.startswith("{"):
                    continue
                record = json.loads(line)
                if name is None or record["event"] == name:
                    found.append(record)
        return found

    def wait_event(self, name, count=1, timeout=15, **fields):
        def matching():
            hits = [e for e in self.events(name) if all(e.get(k) == v for k, v in fields.items())]
            return hits if len(hits) >= count else None
        try:
            return wait_until(matching, timeout=timeout, message=f"{count} x {name} {fields}")
        except AssertionError as exc:
            tail = "\n".join(self.log_text().splitlines()[-25:])
            raise AssertionError(f"{exc}; exit status {self.proc.poll()}; log tail:\n{tail}") \
                from None

    def log_text(self):
        return self.log_path.read_text()

    # -- the process tree ---------------------------------------------------------

    def children(self):
        try:
            return [p for p in psutil.Process(self.pid).children() if p.status() != psutil.STATUS_ZOMBIE]
        except psutil.NoSuchProcess:
            return []

    def wait_children(self, count, timeout=15):
        return wait_until(lambda: (lambda kids: kids if len(kids) == count else None)(self.children()),
                          timeout=timeout, message=f"{count} children")

    def title(self, pid):
        """The process title as an operator sees it in `ps -o args`."""
        result = subprocess.run(["ps", "-o", "args=", "-p", str(pid)], capture_output=True,
                                text=True, timeout=10)
        return result.stdout.strip()

    def signal(self, signum):
        os.kill(self.pid, signum)

    def wait_exit(self, timeout=20):
        return self.proc.wait(timeout=timeout)

    def kill_all(self):
        """Teardown: kill the whole session (parent and children), whatever state they are in."""
        try:
            os.killpg(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        self.log_file.close()


@contextmanager
def supervisor_starter(tmp_path, dsn, *base_args):
    """start(*args, **kwargs) -> a SupervisorProcess with base_args first; every
    supervisor started is killed when the block ends."""
    started = []

    def start(*args, **kwargs):
        kwargs.setdefault("name", f"sup{len(started)}")
        sup = SupervisorProcess(tmp_path, dsn, *base_args, *args, **kwargs)
        started.append(sup)
        return sup

    try:
        yield start
    finally:
        for sup in started:
            sup.kill_all()


def process_gone(pid):
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def wait_gone(pids, timeout=5):
    wait_until(lambda: all(process_gone(pid) for pid in pids), timeout=timeout,
               message=f"processes {pids} to end")


def elapsed_since(start):
    return time.monotonic() - start
