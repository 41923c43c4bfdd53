"""Running the real supervisor as a subprocess and watching it from outside.

The process itself (start, children, stop, kill) is prefork.bench.processes'
SupervisorProcess, the one the bench measures; this adds what only tests need:
its JSON events, read as they come, with every event name checked against the
catalogue (prefork.events), so that a test looking for an event, or for its
absence, fails when the event is renamed instead of passing forever."""
import json
import subprocess
from contextlib import contextmanager

import psutil
from conftest import cli_env, wait_until

from prefork.bench import processes
from prefork.events import Event

EVENT_NAMES = frozenset(event.value for event in Event)


def catalogued(name):
    """`name`, once it is known to be an event the package logs."""
    assert name in EVENT_NAMES, f"{name!r} is not an event in prefork.events (renamed?)"
    return name


def assert_never_logged(log, name):
    """The event `name` is nowhere in `log` (a log's text, or the list of the names of
    its events); and it is a real event name, so that this cannot pass merely
    because the event was renamed."""
    assert catalogued(name) not in log, f"{name} was logged:\n{log}"


class EventLog:
    """A JSON log file read incrementally (a soak writes hundreds of thousands of lines);
    a line cut short by a crash is counted in `unreadable_lines`, not fatal."""

    def __init__(self, path):
        self.path = path
        self._offset, self._partial, self._events = 0, b"", []
        self.unreadable_lines = 0

    def events(self, name=None, **fields):
        """The events so far, of that name (a catalogued one) with those field values."""
        if name is not None:
            catalogued(name)
        self._read_new()
        return [e for e in self._events if (name is None or e.get("event") == name)
                and all(e.get(key) == value for key, value in fields.items())]

    def _read_new(self):
        with open(self.path, "rb") as handle:
            handle.seek(self._offset)
            chunk = handle.read()
        self._offset += len(chunk)
        *lines, self._partial = (self._partial + chunk).split(b"\n")
        for line in lines:
            line = line.strip()
            if not line.startswith(b"{"):
                continue
            try:
                self._events.append(json.loads(line))
            except ValueError:
                self.unreadable_lines += 1


class SupervisorProcess(processes.SupervisorProcess):
    """`python -m prefork run --log-format json ARGS` on `dsn`, started at once, its log
    (a fresh file) and config file (when config_text is given) in tmp_path."""

    def __init__(self, tmp_path, dsn, *args, config_text=None, env=None, name="sup", cwd=None):
        log_path = tmp_path / f"{name}.log"
        log_path.write_bytes(b"")
        args = ["--log-format", "json", *args]
        if config_text is not None:
            self.config_path = tmp_path / f"{name}.conf"
            self.config_path.write_text(config_text)
            args += ["--config", str(self.config_path)]
        super().__init__(args, cli_env(dsn, **(env or {})), log_path, label=name, cwd=cwd)
        self.name = name
        self.log = EventLog(log_path)
        self.start()

    # -- reading the logs -------------------------------------------------------

    def events(self, name=None, **fields):
        return self.log.events(name, **fields)

    def wait_event(self, name, count=1, timeout=15, **fields):
        def matching():
            hits = self.events(name, **fields)
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

    def wait_children(self, count, timeout=15):
        return wait_until(lambda: (lambda kids: kids if len(kids) == count else None)(self.children()),
                          timeout=timeout, message=f"{count} children")

    def title(self, pid):
        """The process title as an operator sees it in `ps -o args`."""
        return titles([pid]).get(pid, "")

    def wait_exit(self, timeout=20):
        return self.proc.wait(timeout=timeout)

    def kill_all(self):
        """Teardown: kill the whole session (parent and children), whatever state they are in."""
        self.kill()


def titles(pids):
    """{pid: title} of these processes as `ps -o args` shows them (gone ones left out)."""
    if not pids:
        return {}
    result = subprocess.run(["ps", "-o", "pid=,args=", "-p", ",".join(map(str, pids))],
                            capture_output=True, text=True, timeout=10)
    found = {}
    for line in result.stdout.splitlines():
        pid, _, title = line.strip().partition(" ")
        found[int(pid)] = title.strip()
    return found


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
