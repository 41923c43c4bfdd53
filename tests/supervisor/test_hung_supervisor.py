"""A frozen supervisor's worker gives its job up before another supervisor may take it.

Supervisor beta runs on a host name of its own (a UTS namespace: `unshare --uts`, so
that alpha cannot see its processes and takes its host for gone), with a job of a
`concurrency = 1` type that runs 12 s. Beta is frozen with SIGSTOP (its worker is
not); alpha, started then, prunes beta once its heartbeat is older than the
supervisor timeout (6 s here) and runs the job. Beta's worker must have stopped its
run before: the runs, as the job's execution log times them, never overlap. The
job is a Python handler, a command job (whose program must be dead first), or a
handler that swallows every stop (its worker must then end itself)."""
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest
from conftest import APPS, wait_until
from harness import SupervisorProcess, process_gone

from prefork import config as config_module
from prefork.jobs import new_job
from prefork.worker.parent_pulse import ParentPulse, SilenceLimits

HOST = "beta-host"
SECONDS = 12
REGISTRY = ("--heartbeat-interval", "1", "--supervisor-timeout", "6")
ARGS = ("--app", "limits_app,hung_app", "--workers", "1", "--poll-interval", "0.2", *REGISTRY)
COMMAND = """[command:hung.command]
argv = {python} {program} {log} {seconds}
concurrency = 1
"""
KINDS = {"handler": "limited.single", "command": "hung.command", "stubborn": "hung.stubborn"}


class OtherHost(SupervisorProcess):
    """A supervisor under the host name HOST (its own UTS namespace)."""

    def start(self):
        self.command = ["unshare", "--uts", "sh", "-c", f'hostname {HOST} && exec "$@"', "sh",
                        *self.command]
        super().start()


@pytest.fixture(scope="module", autouse=True)
def uts_namespaces():
    if shutil.which("unshare") is None or subprocess.run(
            ["unshare", "--uts", "true"], capture_output=True).returncode != 0:
        pytest.skip("needs unshare --uts (root, util-linux)")


def read_runs(log):
    """{pid: [start, end or None]} of the runs the execution log holds, by start."""
    runs = {}
    for line in log.read_text().splitlines():
        what, _, _, _, pid, when = line.split()
        if what == "start":
            runs[int(pid)] = [float(when), None]
        elif what == "end":
            runs[int(pid)][1] = float(when)
    return dict(sorted(runs.items(), key=lambda run: run[1][0]))


def beta_run_pid(beta, job_id, kind):
    """The pid that writes beta's run into the log: its worker, or its program."""
    if kind == "command":
        return beta.wait_event("command_started", job_id=job_id)[0]["command_pid"]
    return beta.wait_event("job_claimed", job_id=job_id)[0]["pid"]


@pytest.mark.parametrize("kind", KINDS)
def test_a_frozen_supervisors_job_never_runs_beside_its_rerun(kind, tmp_path, migrated,
                                                               clean_db, store):
    log = tmp_path / "runs.log"
    config = COMMAND.format(python=sys.executable, program=APPS / "marked_program.py",
                            log=log, seconds=SECONDS)
    job_id = store().enqueue(new_job(KINDS[kind], {"log": str(log), "seconds": SECONDS}))
    beta = OtherHost(tmp_path, migrated, *ARGS, config_text=config, name="beta")
    alpha = None
    try:
        holder = beta_run_pid(beta, job_id, kind)
        wait_until(lambda: log.exists() and log.read_text().startswith("start"), timeout=15)
        os.kill(beta.pid, signal.SIGSTOP)
        frozen_at = time.time()
        alpha = SupervisorProcess(tmp_path, migrated, *ARGS, config_text=config, name="alpha")
        # Beta's worker ends its run (its program's, or, stubborn, its own life) first.
        wait_until(lambda: process_gone(holder) if kind != "handler"
                   else read_runs(log)[holder][1], timeout=30, interval=0.01,
                   message="beta's run to end")
        beta_done_by = time.time()
        alpha.wait_event("job_completed", job_id=job_id, timeout=60)
        runs = read_runs(log)
        assert list(runs)[0] == holder and len(runs) == 2, runs
        (first_start, first_end), (second_start, second_end) = runs.values()
        first_end = first_end or beta_done_by   # stubborn: it never said it ended
        print(f"{kind}: beta ran {first_start:.2f}-{first_end:.2f} (frozen at "
              f"{frozen_at:.2f}), alpha {second_start:.2f}-{second_end:.2f}")
        assert first_end <= second_start, "the two runs overlap"
        assert second_end is not None and second_end - second_start >= SECONDS - 0.5
        # Beta's worker said why it gave the job up, and gave it back, its attempt restored.
        silent = beta.events("worker_parent_silent")
        assert silent and silent[0]["job_id"] == job_id, silent
        assert "no heartbeat" in silent[0]["reason"], silent
        if kind == "stubborn":
            assert "did not stop" in silent[-1]["reason"], silent
        else:
            assert beta.events("claim_released_on_shutdown", job_id=job_id, interrupted=True)
        # Alpha pruned beta after the job was given up: nothing left to hand back.
        pruned = alpha.wait_event("supervisor_pruned", timeout=30)
        assert pruned[0]["jobs_handed_back"] == (1 if kind == "stubborn" else 0), pruned
    finally:
        os.kill(beta.pid, signal.SIGCONT)
        beta.kill_all()
        if alpha is not None:
            alpha.kill_all()


@pytest.mark.parametrize("interval, timeout, lease", [(5, 30, 60), (1, 6, 60), (0.3, 2, 2),
                                                      (1, 600, 2)])
def test_the_limits_leave_a_margin_before_the_prune_and_the_lease(interval, timeout, lease):
    """A child acts after a heartbeat's interval (no alarm between two beats) and is
    done with a stubborn handler (at most a look, half a grace, half a grace after it
    acted) before the prune, and before any lease can run out (two thirds of it after
    the last pass of extension, which comes every third)."""
    limits = SilenceLimits.of(config_module.load(
        {"heartbeat_interval": str(interval), "supervisor_timeout": str(timeout),
         "lease_seconds": str(lease)}, environ={}))
    worst = 1.5 * limits.grace
    assert interval < limits.beat and limits.beat + worst < timeout, limits
    assert lease / 3 < limits.lease and limits.lease + worst < 2 * lease / 3, limits


def test_the_pulse_is_shared_with_a_forked_child():
    """What the parent stamps after the fork, the child reads (a shared mapping)."""
    pulse = ParentPulse()
    read_fd, write_fd = os.pipe()
    go_fd, ready_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.read(go_fd, 1)
        os.write(write_fd, repr(pulse.stamps()).encode())
        os._exit(0)
    pulse.beat(123.5)
    pulse.extended(456.25)
    os.write(ready_fd, b"x")
    seen = os.read(read_fd, 100).decode()
    os.waitpid(pid, 0)
    for fd in (read_fd, write_fd, go_fd, ready_fd):
        os.close(fd)
    assert seen == "(123.5, 456.25)"
