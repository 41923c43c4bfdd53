"""`enqueue` without --app checks a job's type against the job types the running
supervisors of its queue publish in the registry (issue 28): a type none of them
handles is refused in one line (--force enqueues it anyway), a queue no live
supervisor works gets a warning, and what a supervisor handles follows its
[command:TYPE] sections across a reload and includes a Django project's tasks."""
import json
import os
import signal

import pytest
from cli_checks import assert_refused
from conftest import run_cli, wait_until
from django_harness import line, project  # noqa: F401  (fixtures)
from harness import supervisor_starter, wait_gone

from prefork import config as config_module
from prefork.store import open_store
from prefork.store.views import JobFilter

# Heartbeats every second; nobody prunes a killed supervisor within the test.
REGISTRY = ("--heartbeat-interval", "1", "--supervisor-timeout", "600")
COMMANDS = """[prefork-queue]
heartbeat_interval = {interval}

[command:{job_type}]
argv = true
"""


def enqueue(dsn, *args):
    return run_cli("enqueue", *args, dsn=dsn)


def job_types(dsn):
    """{job id: type} of every job in the queue database."""
    store = open_store(config_module.load({"dsn": dsn}, environ={}))
    try:
        return {row["id"]: row["job_type"]
                for row in store.find_jobs(JobFilter(), None, 500).rows}
    finally:
        store.close()


def enqueued_id(result):
    assert result.returncode == 0, result.stderr
    return int(result.stdout)


def test_a_type_no_supervisor_of_its_queue_handles_is_refused_unless_forced(tmp_path,
                                                                             queue_dsn, db):
    with supervisor_starter(tmp_path, queue_dsn, "--app", "ledger_app", *REGISTRY) as start:
        start("--workers", "1").wait_event("supervisor_registered")

        typo = enqueue(queue_dsn, "nop", "{}")
        assert_refused(typo, "unknown job type 'nop': no running supervisor of queue "
                             "'default' handles it (did you mean 'noop'?); --force enqueues "
                             "it anyway")
        assert job_types(queue_dsn) == {}

        handled = enqueue(queue_dsn, "noop", "{}")
        assert handled.stderr == ""
        forced = enqueue(queue_dsn, "nc.tpyo", "{}", "--force")
        assert forced.stderr == ""
        unworked = enqueue(queue_dsn, "nc.tpyo", "{}", "--queue", "nobody")
        assert unworked.stderr == ("prefork-queue: warning: no running supervisor works queue "
                                   "'nobody': the job waits until one that handles 'nc.tpyo' "
                                   "starts\n")
        assert job_types(queue_dsn) == {enqueued_id(handled): "noop",
                                        enqueued_id(forced): "nc.tpyo",
                                        enqueued_id(unworked): "nc.tpyo"}

        path = tmp_path / "jobs.jsonl"
        lines = [{"type": "noop"}, {"type": "noop", "queue": "nobody"}, {"type": "ledgr"},
                 {"type": "sleep"}]
        path.write_text("".join(json.dumps(entry) + "\n" for entry in lines))
        assert_refused(enqueue(queue_dsn, "--file", str(path)),
                       f"{path}:3: unknown job type 'ledgr': no running supervisor of queue "
                       "'default' handles it (did you mean 'ledger'?)")
        assert len(job_types(queue_dsn)) == 3
        forced_file = enqueue(queue_dsn, "--file", str(path), "--force")
        assert forced_file.returncode == 0 and forced_file.stderr == "", forced_file.stderr
        assert forced_file.stdout == "enqueued 4 new jobs (0 already present)\n"


def test_a_killed_supervisor_handles_nothing_once_stale_by_its_own_interval(tmp_path,
                                                                            queue_dsn, db):
    with supervisor_starter(tmp_path, queue_dsn, "--app", "ledger_app", *REGISTRY) as start:
        doomed = start("--workers", "1")
        doomed.wait_event("supervisor_registered")
        assert_refused(enqueue(queue_dsn, "nc.tpyo", "{}"), "unknown job type 'nc.tpyo'")
        children = [child.pid for child in doomed.children()]
        os.killpg(doomed.pid, signal.SIGKILL)
        wait_gone([doomed.pid] + children)

        def warned():   # stale after two of its 1 s heartbeats: no live supervisor known
            result = enqueue(queue_dsn, "nc.tpyo", "{}")
            return result if result.returncode == 0 else None

        result = wait_until(warned, timeout=60, interval=0.5, message="the type let through")
        assert "warning: no running supervisor works queue 'default'" in result.stderr
        assert job_types(queue_dsn) == {enqueued_id(result): "nc.tpyo"}


def test_the_command_types_published_follow_a_reload(tmp_path, sqlite_migrated):
    dsn = sqlite_migrated
    with supervisor_starter(tmp_path, dsn) as start:
        sup = start("--workers", "1",
                    config_text=COMMANDS.format(interval=1, job_type="report.pdf"))
        sup.wait_event("supervisor_registered")
        assert enqueue(dsn, "report.pdf", "{}").returncode == 0
        assert_refused(enqueue(dsn, "report.csv", "{}"), "unknown job type 'report.csv'",
                       "(did you mean 'report.pdf'?)")

        sup.config_path.write_text(COMMANDS.format(interval=2, job_type="report.csv"))
        os.kill(sup.pid, signal.SIGHUP)
        sup.wait_event("config_reloaded")
        wait_until(lambda: enqueue(dsn, "report.csv", "{}").returncode == 0, timeout=30,
                   interval=0.5, message="the reloaded section's type handled")
        assert_refused(enqueue(dsn, "report.pdf", "{}"), "unknown job type 'report.pdf'")
        (row,) = json.loads(run_cli("status", "--json", dsn=dsn).stdout)["supervisors"]
        assert row["heartbeat_interval_s"] == 2.0


@pytest.mark.parametrize("project", ["sqlite"], indirect=True)
def test_a_django_projects_tasks_are_the_types_its_supervisor_handles(project):  # noqa: F811
    sup = project.supervisor()
    wait_until(lambda: sup.log.events("supervisor_registered"), timeout=60,
               message="the Django supervisor registered")
    typo = project.cli("enqueue", "shop.tasks.mark_ordr", "{}")
    assert_refused(typo, "unknown job type 'shop.tasks.mark_ordr'",
                   "(did you mean 'shop.tasks.mark_order'?)")
    handled = project.cli("enqueue", "shop.tasks.record", "{}", "--delay", "3600")
    assert handled.returncode == 0 and handled.stderr == "", handled.stderr
