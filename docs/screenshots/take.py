"""Make the documentation's screenshots: run once by hand, commit the PNGs.

    python3 docs/screenshots/take.py [--out docs/screenshots]

It starts, in a directory of its own, a real supervisor on SQLite with the example
handlers and a schedule, enqueues jobs (some finish, some die, some keep workers
busy), waits for the supervisor's first per-minute rollup, then opens each page of
a real `prefork-queue dashboard` in headless Chromium (Debian's chromium and
chromium-driver, through selenium) and saves it as a PNG. It also prints what
`top -b -c` shows of the supervisor's processes, for the process titles' page.
Everything it started is stopped before it exits.
"""
import argparse
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from selenium.webdriver.common.by import By

# The browser the dashboard's tests drive (tests/chromium.py).
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))
from chromium import chromium  # noqa: E402
PASSWORD = "screenshots-only"
PAGES = {"overview": "/", "jobs": "/jobs", "dead": "/dead", "queues": "/queues",
         "schedules": "/schedules", "restart": "/restart", "workflows": "/workflows"}
CONFIG = """[prefork-queue]
dsn = sqlite:///{dir}/prefork-queue.db
queues = default,reports

[schedule:nightly-report]
type = report
cron = 0 3 * * *
timezone = Europe/Zagreb
payload = {{"title": "nightly"}}
queue = reports

[schedule:sweep]
type = sleep
every = 300
payload = {{"seconds": 1}}
"""
SERVING = re.compile(r"dashboard serving on (http://\S+) ")
ROLLUP_WAIT = 75        # seconds: a supervisor writes its per-minute counts once a minute


def prefork_queue(*args, env, **kwargs):
    return subprocess.Popen([sys.executable, "-m", "prefork", *args], env=env, **kwargs)


def run(*args, env):
    subprocess.run([sys.executable, "-m", "prefork", *args], env=env, check=True,
                   stdout=subprocess.DEVNULL)


def until(condition, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.2)
    raise SystemExit(f"take.py: gave up waiting for {what}")


def enqueue_examples(env):
    for number in range(12):
        run("enqueue", "report", f'{{"title": "weekly {number}"}}', "--queue", "reports", env=env)
    for times in (9, 9, 9):
        run("enqueue", "fail-n-times", f'{{"times": {times}}}', "--max-attempts", "1", env=env)
    for _ in range(3):
        run("enqueue", "sleep", '{"seconds": 600}', env=env)


# A group of reports with a summary after it (policy "ended": it runs whatever its
# members' ends), one member that dies, two after the reports that keep a worker busy.
WORKFLOW = """
import prefork
job = prefork.job
members = [job("report", {"title": f"part {n}"}, queue="reports") for n in range(5)]
members += [job("fail-n-times", {"times": 9}, max_attempts=1)]
members += [job("sleep", {"seconds": 600}, queue="reports") for _ in range(2)]
with prefork.Client() as client:
    client.enqueue_workflow(prefork.group(members, policy="ended",
                                          then=job("report", {"title": "summary"}, queue="reports")),
                            key="monthly-reports")
"""


def enqueue_workflow(env):
    subprocess.run([sys.executable, "-c", WORKFLOW], env=env, check=True)


def dashboard_url(process):
    line = process.stdout.readline().decode()
    match = SERVING.search(line)
    if not match:
        raise SystemExit(f"take.py: the dashboard said {line!r}")
    return match.group(1).rstrip("/")


def screenshots(url, out, profile):
    driver = chromium(profile)
    try:
        driver.get(url + "/login")
        driver.find_element(By.ID, "password").send_keys(PASSWORD)
        driver.find_element(By.ID, "login").click()
        until(lambda: driver.find_elements(By.ID, "logout"), 20, "the login")
        for name, path in PAGES.items():
            driver.get(url + path)
            time.sleep(2)     # the page's script draws its charts after the load
            driver.save_screenshot(str(out / f"{name}.png"))
        driver.get(url + "/dead")
        dead = driver.find_element(By.CSS_SELECTOR, "main a[href*='/jobs/']")
        driver.get(dead.get_attribute("href"))
        time.sleep(1)
        driver.save_screenshot(str(out / "job.png"))
        # The group of the workflow listed: the first step of its chain (the group
        # and its callback).
        driver.get(url + "/workflows")
        driver.get(driver.find_element(By.CSS_SELECTOR, "#workflow-rows a").get_attribute("href"))
        group = driver.find_element(By.CSS_SELECTOR, "#member-rows a[href*='/workflows/']")
        driver.get(group.get_attribute("href"))
        time.sleep(1)
        driver.save_screenshot(str(out / "workflow.png"))
    finally:
        driver.quit()


def top_lines(pid):
    """`top -b -c` lines of the supervisor and its children."""
    children = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout.split()
    pids = ",".join([str(pid), *children])
    return subprocess.run(["top", "-b", "-c", "-n", "1", "-w", "200", "-p", pids],
                          capture_output=True, text=True).stdout


def stop(process):
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent)
    out = parser.parse_args().out
    with tempfile.TemporaryDirectory(prefix="prefork-screenshots-") as work:
        workdir = Path(work)
        (workdir / "prefork-queue.conf").write_text(CONFIG.format(dir=workdir))
        env = {name: value for name, value in os.environ.items() if not name.startswith("PREFORK_")}
        env.update(PREFORK_QUEUE_CONFIG=str(workdir / "prefork-queue.conf"),
                   PREFORK_EXAMPLES_DIR=str(workdir / "reports"))
        started = []
        try:
            run("migrate", env=env)
            supervisor = prefork_queue("run", "--workers", "4", "--app", "prefork.examples",
                                       "--log-file", str(workdir / "log"), env=env, cwd=work)
            started.append(supervisor)
            enqueue_examples(env)
            enqueue_workflow(env)
            print(f"take.py: waiting {ROLLUP_WAIT} s for the first per-minute rollup", file=sys.stderr)
            time.sleep(ROLLUP_WAIT)
            if supervisor.poll() is not None:
                raise SystemExit(f"take.py: the supervisor exited:\n{(workdir / 'log').read_text()}")
            print(top_lines(supervisor.pid))
            dashboard = prefork_queue("dashboard", "--dashboard-bind", "127.0.0.1:0",
                                      env={**env, "PREFORK_QUEUE_DASHBOARD_PASSWORD": PASSWORD},
                                      stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=work)
            started.append(dashboard)
            screenshots(dashboard_url(dashboard), out, workdir / "chromium")
        finally:
            for process in reversed(started):
                stop(process)
    print(f"take.py: screenshots in {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
