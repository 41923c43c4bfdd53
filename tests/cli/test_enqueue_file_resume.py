"""`enqueue --file` cut off by the database mid-file: the error line says how many
jobs were committed and from which line to resume, and resuming there with
--from-line gives exactly one job per line of the file.

The producer writes to a throwaway MariaDB (tests/throwaway_db.py), and the outage
comes once some batches have committed: the link is cut (through tests/tcp_proxy.py),
or the server is killed (SIGKILL; committed batches survive it, see
throwaway_db.SERVER_OPTIONS). The jobs have no keys, so a line enqueued twice would
be two jobs: the payload names its line, and the table is checked line by line.
"""
import json
import re
import subprocess
import sys

import pytest
from conftest import cli_env, run_cli, wait_until
from tcp_proxy import TcpProxy
from throwaway_db import throwaway_mariadb  # noqa: F401  (pytest fixture)

LINES = 80_000       # enough that the outage comes long before the end
BLANK_EVERY = 997    # a blank line now and then: the lines named are the file's
CUT_AFTER = 3000     # jobs committed before the outage


def write_jobs(path):
    """The file; the line numbers that hold a job."""
    numbered = []
    with open(path, "w") as handle:
        for line in range(1, LINES + 1):
            if line % BLANK_EVERY == 0:
                handle.write("\n")
                continue
            handle.write(json.dumps({"type": "mail", "payload": {"line": line}}) + "\n")
            numbered.append(line)
    return numbered


def job_count(server):
    with server.connect(server.database) as conn, conn.cursor() as cursor:
        cursor.execute("SELECT COUNT(*) FROM prefork_jobs")
        return cursor.fetchone()[0]


def lines_in_table(server):
    """{line: how many jobs carry it}."""
    with server.connect(server.database) as conn, conn.cursor() as cursor:
        cursor.execute("SELECT JSON_EXTRACT(payload, '$.line'), COUNT(*) FROM prefork_jobs"
                       " GROUP BY 1")
        return {int(line): count for line, count in cursor.fetchall()}


def resume_line(message, rows):
    """The line the error names to resume from, given the jobs found in the table.
    A batch whose COMMIT was cut may or may not be in: the line names both cases."""
    committed = int(re.search(r": (\d+) jobs of \S+ committed", message).group(1))
    doubt = re.search(r"lines (\d+)-(\d+) \((\d+) jobs\) were being committed when the "
                      r"connection was lost and may be in the table: resume with "
                      r"--from-line (\d+) if they are not, --from-line (\d+) if they are",
                      message)
    if doubt is None:
        assert rows == committed, message
        return int(re.search(r", none after: resume with --from-line (\d+)$", message).group(1))
    in_doubt = int(doubt.group(3))
    assert rows in (committed, committed + in_doubt), message
    return int(doubt.group(4) if rows == committed else doubt.group(5))


@pytest.mark.parametrize("outage", ["link_cut", "server_killed"])
def test_a_cut_off_file_says_what_was_committed_and_resumes_exactly(throwaway_mariadb,
                                                                    tmp_path, outage):
    server = throwaway_mariadb
    assert run_cli("migrate", dsn=server.dsn, timeout=60).returncode == 0
    path = tmp_path / "jobs.jsonl"
    numbered = write_jobs(path)
    with TcpProxy("127.0.0.1", server.port) as proxy:
        dsn = f"mysql://root@127.0.0.1:{proxy.port}/{server.database}" \
            if outage == "link_cut" else server.dsn
        producer = subprocess.Popen([sys.executable, "-m", "prefork", "enqueue", "--file",
                                     str(path)], env=cli_env(dsn), text=True,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            wait_until(lambda: job_count(server) >= CUT_AFTER, timeout=120,
                       message=f"{CUT_AFTER} jobs committed")
            if outage == "link_cut":
                proxy.cut()
            else:
                server.kill()
            _, stderr = producer.communicate(timeout=60)
        finally:
            producer.kill()   # nothing to do once it has exited
            producer.wait()
        assert producer.returncode == 3, stderr
        message = stderr.strip()
        assert len(message.splitlines()) == 1, stderr
        # What failed is the lost connection, not the ROLLBACK that came after it.
        assert re.match(r"prefork-queue: error: database error OperationalError 20(06|13): ",
                        message), message
        if outage == "link_cut":
            proxy.restore()
        else:
            server.start()
        rows = job_count(server)
        assert CUT_AFTER <= rows < len(numbered)
        start = resume_line(message, rows)
        resumed = run_cli("enqueue", "--file", str(path), "--from-line", str(start), dsn=dsn)
    assert resumed.returncode == 0, resumed.stderr
    assert lines_in_table(server) == {line: 1 for line in numbered}


def test_from_line_skips_the_lines_before_it_and_is_refused_out_of_place(tmp_path):
    dsn = f"sqlite:///{tmp_path / 'queue.db'}"
    assert run_cli("migrate", dsn=dsn).returncode == 0
    path = tmp_path / "jobs.jsonl"
    path.write_text("not json: skipped\n\n"
                    + "".join(json.dumps({"type": "mail", "payload": {"line": line}}) + "\n"
                              for line in (3, 4, 5)))
    done = run_cli("enqueue", "--file", str(path), "--from-line", "3", dsn=dsn)
    assert done.returncode == 0, done.stderr
    assert "enqueued 3 new jobs (0 already present)" in done.stdout
    for args, says in ((["--from-line", "6"], f"--from-line 6: {path} has 5 lines"),
                       (["--from-line", "0"], "--from-line: must be at least 1")):
        refused = run_cli("enqueue", "--file", str(path), *args, dsn=dsn)
        assert refused.returncode == 2 and says in refused.stderr, refused.stderr
    refused = run_cli("enqueue", "mail", "--from-line", "2", dsn=dsn)
    assert refused.returncode == 2 and "--from-line goes with --file" in refused.stderr
