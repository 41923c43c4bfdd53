"""`prefork-queue cancel`, and what the other commands say of cancelled jobs (retry,
prune, show, status), as a user runs them: `python -m prefork ...` in a subprocess,
on SQLite and on MariaDB. Bad input is one line, exit 2, nothing changed; an id
that names no job is exit 4 with the report printed."""
import json
import socket

import pytest
from cli_checks import USAGE_ERROR, assert_refused
from conftest import run_cli, wait_until
from harness import supervisor_starter

from prefork.jobs import new_job
from prefork.retry import Decision

# This host's name: SQLite warns of a job held by another host's worker.
WORKER = f"{socket.gethostname()}:1"
MISSING = 4   # the README's exit code for `cancel` naming a job that does not exist


@pytest.fixture
def s(backend_store):
    return backend_store()


def statuses(store, *job_ids):
    return [store.get(job_id)["status"] for job_id in job_ids]


def test_cancel_says_what_became_of_each_job_and_changes_only_what_it_says(queue_dsn, s):
    running = s.enqueue(new_job("mail.send", {"n": 1}))
    assert [job.id for job in s.claim(["default"], WORKER, 60)] == [running]
    done = s.enqueue(new_job("mail.send", {"n": 2}))
    (claimed,) = s.claim(["default"], WORKER, 60)
    assert claimed.id == done and s.complete(claimed)
    ready = s.enqueue(new_job("mail.send", {"n": 3}))
    delayed = s.enqueue(new_job("mail.send", {"n": 4}, delay=3600))
    untouched = s.enqueue(new_job("mail.send", {"n": 5}))

    result = run_cli("cancel", str(ready), str(delayed), str(running), str(done), dsn=queue_dsn)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    assert result.stdout.splitlines() == [
        f"cancelled: {ready}, {delayed} (2 jobs: never run)",
        f"stopping: {running} (1 job: running: their supervisors stop them, then they end "
        "cancelled)",
        f"already finished: {done} (1 job: left as they are)"]
    assert statuses(s, ready, delayed, running, done, untouched) == [
        "cancelled", "cancelled", "reserved", "done", "ready"]
    assert s.get(ready)["finished_at"] is not None and s.get(ready)["last_error"] == "cancelled"
    assert s.get(running)["cancel_requested_at"] is not None


def test_cancel_stops_a_job_a_real_supervisor_runs(queue_dsn, s, tmp_path):
    with supervisor_starter(tmp_path, queue_dsn, "--app", "prefork.examples") as start:
        sup = start("--workers", "1")
        job_id = s.enqueue(new_job("sleep", {"seconds": 60}))
        sup.wait_event("job_claimed", job_id=job_id)
        result = run_cli("cancel", str(job_id), dsn=queue_dsn)
        assert result.returncode == 0, result.stderr
        assert result.stdout.startswith(f"stopping: {job_id} (1 job: running")
        wait_until(lambda: s.get(job_id)["status"] == "cancelled", timeout=30,
                   message="the running job cancelled")
        again = run_cli("cancel", str(job_id), dsn=queue_dsn)
        assert again.stdout == f"already finished: {job_id} (1 job: left as they are)\n"
        assert sup.proc.poll() is None


def test_an_id_that_names_no_job_is_exit_4_with_the_report(queue_dsn, s):
    ready = s.enqueue(new_job("mail.send"))
    result = run_cli("cancel", str(ready), "987654321", dsn=queue_dsn)
    assert result.returncode == MISSING, result.stderr
    assert f"cancelled: {ready} " in result.stdout and "no such job: 987654321" in result.stdout
    (line,) = result.stderr.splitlines()
    assert "no job 987654321" in line and "the others were handled" in line
    assert "Traceback" not in result.stderr
    assert statuses(s, ready) == ["cancelled"]
    again = run_cli("cancel", "987654321", "--json", dsn=queue_dsn)
    assert again.returncode == MISSING
    assert json.loads(again.stdout) == {"cancelled": [], "stopping": [], "finished": [],
                                        "missing": [987654321]}
    (line,) = again.stderr.splitlines()
    assert line == "prefork-queue: error: no job 987654321"


def test_cancel_matching_a_queue_and_type_leaves_the_others(queue_dsn, s):
    news = [s.enqueue(new_job("newsletter.send", {"n": n}, queue="mail")) for n in range(3)]
    other_type = s.enqueue(new_job("mail.send", queue="mail"))
    other_queue = s.enqueue(new_job("newsletter.send", queue="bulk"))
    result = run_cli("cancel", "--queue", "mail", "--type", "newsletter.send", "--json",
                     dsn=queue_dsn)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert sorted(report["cancelled"]) == news and report["missing"] == []
    assert statuses(s, *news, other_type, other_queue) == [
        "cancelled", "cancelled", "cancelled", "ready", "ready"]
    by_queue = run_cli("cancel", "--queue", "bulk", dsn=queue_dsn)
    assert by_queue.returncode == 0
    assert by_queue.stdout == f"cancelled: {other_queue} (1 job: never run)\n"
    nothing = run_cli("cancel", "--type", "no.such.type", dsn=queue_dsn)
    assert nothing.returncode == 0 and nothing.stdout == "no unfinished job matches\n"
    assert statuses(s, other_type) == ["ready"]


@pytest.mark.parametrize("args,words", [
    ((), ["give job ids", "--queue"]),
    (("1", "--queue", "mail"), ["not both"]),
    (("--queue", "bad queue"), ["invalid queue name"]),
    (("--type", "bad type!"), ["invalid job type"]),
    (("seven",), ["invalid int value"]),
])
def test_bad_cancel_input_is_one_line_and_cancels_nothing(queue_dsn, s, args, words):
    ready = s.enqueue(new_job("mail.send", queue="mail"))
    assert_refused(run_cli("cancel", *args, dsn=queue_dsn), *words, exit_code=USAGE_ERROR)
    assert statuses(s, ready) == ["ready"]


def test_retry_reruns_cancelled_jobs_by_id_and_with_all_only_when_asked(queue_dsn, s):
    first, second = (s.enqueue(new_job("mail.send", {"n": n})) for n in range(2))
    assert s.cancel([first, second]).cancelled == [first, second]
    dead = s.enqueue(new_job("mail.send", {"n": 3}))
    (job,) = s.claim(["default"], WORKER, 60)
    assert job.id == dead and s.fail(job, "Boom", Decision(dead=True, delay=0))

    by_id = run_cli("retry", str(first), dsn=queue_dsn)
    assert by_id.returncode == 0 and by_id.stdout == "retried 1 job\n"
    assert statuses(s, first, second) == ["ready", "cancelled"]
    dead_only = run_cli("retry", "--all", dsn=queue_dsn)
    assert dead_only.stdout == "retried 1 job\n"
    assert statuses(s, second, dead) == ["cancelled", "ready"]
    assert_refused(run_cli("retry", str(second), "--cancelled", dsn=queue_dsn), "--all")
    assert statuses(s, second) == ["cancelled"]
    with_cancelled = run_cli("retry", "--all", "--cancelled", dsn=queue_dsn)
    assert with_cancelled.stdout == "retried 1 job\n"
    row = s.get(second)
    assert (row["status"], row["attempts"], row["finished_at"]) == ("ready", 0, None)


def test_prune_removes_old_cancelled_jobs_with_the_dead_ones(queue_dsn, s, db):
    cancelled = s.enqueue(new_job("mail.send"))
    s.cancel([cancelled])
    kept = s.enqueue(new_job("mail.send"))
    db.sleep(0.2)
    result = run_cli("prune", "--dead-older-than", "0.1s", dsn=queue_dsn)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["deleted 0 dead jobs", "deleted 1 cancelled job",
                                          "deleted 0 dead workflows",
                                          "deleted 0 cancelled workflows",
                                          "deleted 0 old supervisor records"]
    assert s.get(cancelled) is None and statuses(s, kept) == ["ready"]
    only_done = run_cli("prune", "--done-older-than", "0s", dsn=queue_dsn)
    assert "cancelled" not in only_done.stdout


def test_show_and_status_know_the_cancelled_state_and_a_pending_cancel(queue_dsn, s):
    running = s.enqueue(new_job("mail.send", {"n": 1}))
    assert [job.id for job in s.claim(["default"], WORKER, 60)] == [running]
    ready = s.enqueue(new_job("mail.send", {"n": 2}))
    s.cancel([ready, running])

    shown = json.loads(run_cli("show", str(ready), dsn=queue_dsn).stdout)
    assert shown["status"] == "cancelled" and shown["last_error"] == "cancelled"
    assert "cancel" not in shown
    stopping = run_cli("show", str(running), dsn=queue_dsn)
    fields = list(json.loads(stopping.stdout).items())
    names = [name for name, _ in fields]
    assert names[names.index("status") + 1] == "cancel"
    assert dict(fields)["cancel"].startswith("requested at ")
    assert dict(fields)["cancel"].endswith(": its supervisor is stopping it")

    report = json.loads(run_cli("status", "--json", dsn=queue_dsn).stdout)
    assert report["queues"]["default"]["cancelled"] == 1
    assert report["queues"]["default"]["reserved"] == 1
    text = run_cli("status", dsn=queue_dsn).stdout
    header = next(line for line in text.splitlines() if line.startswith("QUEUE"))
    row = next(line for line in text.splitlines() if line.startswith("default"))
    assert header.split()[5] == "CANCELLED" and row.split()[5] == "1"
