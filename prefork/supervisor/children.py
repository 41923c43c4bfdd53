"""The parent's record of each child: its pipes, what it holds, why it may be stopping."""
import json
import os
import signal
import time


class ChildProcess:
    def __init__(self, pid, slot, generation, read_fd, wake_fd):
        self.pid, self.slot, self.generation = pid, slot, generation
        self.read_fd, self.wake_fd = read_fd, wake_fd
        self.started = time.monotonic()
        self.started_wall = time.time()   # compared with restart requests
        self.buffer = b""
        self.ready = False
        self.waiting = False        # idle, with no job ready when it last looked
        self.job = None             # {"id", "token", "type", "since"} while busy
        self.held = {}              # {job id: token} claimed in a batch, not started
        # {job id: finished job} run to success, completion not yet written by the child
        self.unsaved = {}
        self.retire_reason = None   # the child asked to be recycled (max-items, max-memory)
        self.stop_cause = None      # why we told it to stop; None while it is wanted
        self.kill_reason = None     # why we killed it, if we did
        self.charge_job = True      # does its death count against the job it holds?
        self.deadline = None        # (monotonic time, reason, charge): SIGKILL then

    @property
    def stopping(self):
        return self.stop_cause is not None

    def read_messages(self):
        """Decode complete lines from the pipe; returns them as dicts."""
        try:
            while True:
                chunk = os.read(self.read_fd, 65536)
                if not chunk:
                    break
                self.buffer += chunk
        except BlockingIOError:
            pass
        *lines, self.buffer = self.buffer.split(b"\n")
        return [json.loads(line) for line in lines if line]

    def apply(self, message):
        """Update what we know from one message; returns the jobs it tells us are
        finished (each the job's dict with its outcome and seconds), often none."""
        kind = message["e"]
        if kind == "ready":
            self.ready = True
        elif kind == "held":
            self.held = dict(message["jobs"])
        elif kind == "busy":
            self.held.pop(message["id"], None)
            self.waiting = False
            self.job = {"id": message["id"], "token": message["token"], "type": message["type"],
                        "queue": message["queue"], "since": time.monotonic()}
        elif kind == "waiting":
            self.waiting = True
        elif kind == "idle":
            return self._job_ended(message.get("outcome"))
        elif kind == "saved":
            lost = set(message["lost"])
            saved = [dict(job, outcome="lost" if job_id in lost else "done")
                     for job_id, job in self.unsaved.items()]
            self.unsaved = {}
            return saved
        elif kind == "retire":
            self.retire_reason = message["reason"]
        return []

    def _job_ended(self, outcome):
        finished, self.job = self.job, None
        if not (finished and outcome):
            return []
        ended = time.monotonic()
        finished = dict(finished, seconds=ended - finished["since"], ended=ended)
        if outcome == "unsaved":   # its outcome comes with the "saved" message
            self.unsaved[finished["id"]] = finished
            return []
        return [dict(finished, outcome=outcome)]

    def wake(self):
        """Tell a waiting child that work is ready."""
        self.waiting = False
        try:
            os.write(self.wake_fd, b"w")
        except OSError:  # full (a wake-up is pending) or the child is gone
            pass

    def send(self, signum):
        try:
            os.kill(self.pid, signum)
        except ProcessLookupError:
            pass  # already gone: the reaper will see it

    def close(self):
        os.close(self.read_fd)
        os.close(self.wake_fd)


def describe_status(status):
    """A wait status as an operator reads it: SIGKILL, or exit code N."""
    if os.WIFSIGNALED(status):
        return signal.Signals(os.WTERMSIG(status)).name
    return f"exit code {os.WEXITSTATUS(status)}"
