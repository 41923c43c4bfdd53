"""The dashboard in a real browser: headless Chromium (Debian's chromium and
chromium-driver) driven by Selenium, against a real `prefork-queue dashboard` and a
real supervisor on SQLite. Log in, retry a dead job, pause and resume a queue,
watch the overview update by itself, and check that hostile data raises no dialog
and injects no element. A screenshot of each page is saved under the test's
tmp_path; with PREFORK_DASHBOARD_SCREENSHOT=path the overview's (a worker busy) is copied there
(how docs/dashboard-overview.png is made)."""
import json
import math
import os
import shutil
from datetime import datetime, timedelta, timezone

import pytest
from chromium import chromium
from conftest import wait_until
from dashboard_helpers import PASSWORD, DashboardProcess, make_dead
from harness import supervisor_starter
from selenium.common.exceptions import NoAlertPresentException
from selenium.webdriver.common.by import By

from prefork.jobs import new_job
from prefork.limits.rules import LimitRule
from prefork.store.views import MinuteCounts

HOSTILE_QUEUE = '<img id="injected" src=x onerror="alert(1)">'   # fits VARCHAR(64)
HOSTILE = '<script>alert("x")</script>' + HOSTILE_QUEUE
PAGES = {"overview": "/", "jobs": "/jobs", "dead": "/dead", "queues": "/queues",
         "schedules": "/schedules", "restart": "/restart", "login": "/login"}


@pytest.fixture
def browser(tmp_path):
    driver = chromium(tmp_path / "chromium", window="1400,1100", console_log=True)
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture
def dashboard(sqlite_migrated):
    with DashboardProcess(sqlite_migrated, password=PASSWORD) as process:
        yield process


def assert_inert(driver):
    """No dialog opened, no element our hostile data names exists, no CSP violation
    other than the ones hostile markup would cause had it been parsed."""
    try:
        alert = driver.switch_to.alert
        raise AssertionError(f"a dialog opened: {alert.text!r}")
    except NoAlertPresentException:
        pass
    assert driver.find_elements(By.ID, "injected") == []
    assert driver.find_elements(By.CSS_SELECTOR, "main script, main img") == []


def log_in(driver, dashboard):
    driver.get(dashboard.url + "/login")
    driver.find_element(By.ID, "password").send_keys(PASSWORD)
    driver.find_element(By.ID, "login").click()
    wait_until(lambda: driver.find_elements(By.ID, "logout"), message="logged in")


def text_of(driver, element_id):
    """The element's text, read in one script call: the page may be replacing it (or
    navigating away) meanwhile, which would leave a WebElement stale. "" when absent."""
    return driver.execute_script(
        "const found = document.getElementById(arguments[0]);"
        "return found ? found.textContent : '';", element_id)


def wait_for_notice(driver, words):
    """After a click that posts a form: the page it redirects to, saying `words`."""
    wait_until(lambda: words in text_of(driver, "notice"), message=f"the notice {words!r}")


def test_cancel_a_job_and_a_hostile_concurrency_key_in_the_limits_table(browser, dashboard,
                                                                        sqlite_store):
    store = sqlite_store()
    rule = LimitRule("report.build", concurrency=1)
    store.publish_limits([rule], ["report.build"])
    limited = [store.enqueue(new_job("report.build", {"n": n}, concurrency_key=HOSTILE))
               for n in range(2)]
    ready = store.enqueue(new_job("mail.send", {}, queue="mail"))
    log_in(browser, dashboard)
    browser.get(dashboard.url + "/")
    wait_until(lambda: "as of" in text_of(browser, "updated")
               and HOSTILE in text_of(browser, "limit-rows"), message="the Limits table drawn")
    assert_inert(browser)
    row = browser.find_element(By.CSS_SELECTOR, "#limit-rows tr").text
    # running, limit, no rate, waiting
    assert row.split()[0] == "report.build" and row.endswith(" 0 1 – 2")

    browser.get(dashboard.url + f"/jobs/{ready}")
    browser.find_element(By.ID, "cancel").click()
    wait_for_notice(browser, f"Job {ready} cancelled: it will not run.")
    assert store.get(ready)["status"] == "cancelled"
    assert browser.find_elements(By.ID, "cancel") == []
    assert [store.get(job_id)["status"] for job_id in limited] == ["ready", "ready"]
    assert_inert(browser)


def test_log_in_retry_pause_and_resume_with_hostile_data_inert(browser, dashboard,
                                                               sqlite_store, sqlite_db, tmp_path):
    store = sqlite_store()
    retry_id = make_dead(store, queue="mail", key="welcome-7")
    hostile_id = make_dead(store, queue="evil", key=HOSTILE, payload={"html": HOSTILE},
                           error=HOSTILE)
    sqlite_db.execute("UPDATE prefork_jobs SET job_type = %s, queue = %s WHERE id = %s",
                      (HOSTILE, HOSTILE_QUEUE, hostile_id))
    store.enqueue(new_job("report.build", {}, queue="reports"))

    log_in(browser, dashboard)
    for name, path in {**PAGES, "job": f"/jobs/{hostile_id}"}.items():
        if name == "login":
            continue
        browser.get(dashboard.url + path)
        if name == "overview":   # its table is drawn again by script from the JSON API
            wait_until(lambda: "as of" in text_of(browser, "updated") and browser.find_elements(
                By.CSS_SELECTOR, "#chart-depth svg"), message="the overview updated")
            assert HOSTILE_QUEUE in text_of(browser, "queue-rows")
        assert_inert(browser)
        browser.save_screenshot(str(tmp_path / f"{name}.png"))
    browser.get(dashboard.url + f"/jobs/{hostile_id}")
    # Shown as text, not as markup: the key and type verbatim, the payload as JSON.
    assert HOSTILE in text_of(browser, "fields")
    assert json.dumps(HOSTILE) in text_of(browser, "payload")

    browser.get(dashboard.url + f"/jobs/{retry_id}")
    browser.find_element(By.ID, "retry").click()
    wait_for_notice(browser, "Retried 1 job")
    assert store.get(retry_id)["status"] == "ready"
    assert store.get(hostile_id)["status"] == "dead"

    browser.get(dashboard.url + "/queues")
    browser.find_element(By.CSS_SELECTOR, "button.pause[data-queue='reports']").click()
    wait_for_notice(browser, "Queue reports paused")
    assert {q.queue: q.paused for q in store.queue_overview()}["reports"] is True
    browser.find_element(By.CSS_SELECTOR, "button.resume[data-queue='reports']").click()
    wait_for_notice(browser, "Queue reports resumed")
    assert {q.queue: q.paused for q in store.queue_overview()}["reports"] is False
    browser.save_screenshot(str(tmp_path / "queues-after.png"))
    assert_inert(browser)


def test_retry_all_matching_runs_batch_after_batch_with_progress(browser, dashboard,
                                                                 sqlite_store, sqlite_db, tmp_path):
    store = sqlite_store()
    store.enqueue_many([new_job("mail.send", {}, queue="bulk") for _ in range(1100)])
    sqlite_db.execute("UPDATE prefork_jobs SET status = 'dead', finished_at = created_at")
    other = make_dead(store, queue="other")
    log_in(browser, dashboard)
    browser.get(dashboard.url + "/dead?queue=bulk")
    browser.find_element(By.ID, "retry-all").click()
    wait_until(lambda: "retry: done, 1100 jobs." in text_of(browser, "progress"), timeout=30,
               message="the bulk retry finished")
    browser.save_screenshot(str(tmp_path / "dead-bulk.png"))
    assert sqlite_db.scalar("SELECT COUNT(*) FROM prefork_jobs WHERE status = 'ready'") == 1100
    assert store.get(other)["status"] == "dead"

    sqlite_db.execute("UPDATE prefork_jobs SET status = 'dead' WHERE queue = 'bulk'")
    browser.find_element(By.ID, "discard-all").click()   # arms it only
    assert "Click again to confirm" in text_of(browser, "progress")
    assert sqlite_db.scalar("SELECT COUNT(*) FROM prefork_jobs WHERE queue = 'bulk'") == 1100
    browser.find_element(By.ID, "discard-all").click()
    wait_until(lambda: "discard: done, 1100 jobs." in text_of(browser, "progress"), timeout=30,
               message="the bulk discard finished")
    assert sqlite_db.scalar("SELECT COUNT(*) FROM prefork_jobs WHERE queue = 'bulk'") == 0
    assert store.get(other)["status"] == "dead"
    assert_inert(browser)


def queue_cells(driver, queue):
    """The overview table's cells of `queue` as texts (None while it has no row), read in
    one go (the page replaces its rows as it updates)."""
    rows = driver.execute_script(
        "return [...document.querySelectorAll('#queue-rows tr')]"
        ".map((row) => [...row.cells].map((cell) => cell.textContent.trim()));")
    return next((cells for cells in rows if cells and cells[0] == queue), None)


def test_the_overview_updates_itself_as_jobs_finish(browser, dashboard, sqlite_migrated,
                                                     sqlite_store, tmp_path):
    store = sqlite_store()
    now = datetime.now(timezone.utc).replace(tzinfo=None, second=0, microsecond=0)
    store.write_minutes(0, "earlier-host", [
        MinuteCounts(now - timedelta(minutes=age), "work", "sleep",
                     done=round(8 + 5 * math.sin(age / 6)), failed=int(age % 9 == 0),
                     dead=0, run_seconds=1.0) for age in range(1, 50)])
    job_id = store.enqueue(new_job("sleep", {"seconds": 6}, queue="work"))
    browser.get(dashboard.url + "/")
    browser.execute_script("window.notReloaded = true;")
    wait_until(lambda: (queue_cells(browser, "work") or [None, None])[1] == "1",
               message="one ready job shown")
    wait_until(lambda: browser.find_elements(By.CSS_SELECTOR, "#chart-hour polyline.done"),
               message="the throughput chart drawn")
    done_before = int(queue_cells(browser, "work")[6])   # the earlier minutes' jobs (Done, 1 h)
    assert done_before > 0

    with supervisor_starter(tmp_path, sqlite_migrated, "--app", "ledger_app", "--queues", "work",
                            "--heartbeat-interval", "1") as start:
        supervisor = start("--workers", "2")
        wait_until(lambda: browser.execute_script(
            "return document.getElementById('supervisors').innerHTML;").count(f"/jobs/{job_id}"),
                   timeout=30, message="the busy worker shown with its job")
        busy = tmp_path / "overview-busy.png"
        browser.save_screenshot(str(busy))
        if os.environ.get("PREFORK_DASHBOARD_SCREENSHOT"):
            shutil.copyfile(busy, os.environ["PREFORK_DASHBOARD_SCREENSHOT"])
        wait_until(lambda: store.get(job_id)["status"] == "done", timeout=30, message="job done")
        wait_until(lambda: queue_cells(browser, "work")[1:4] == ["0", "0", "0"], timeout=15,
                   message="ready, delayed, reserved back to 0")
        supervisor.stop()   # a clean stop writes its rollup: the done count follows
    wait_until(lambda: int(queue_cells(browser, "work")[6]) > done_before, timeout=15,
               message="the job counted as done")
    assert browser.execute_script("return window.notReloaded === true;")
    assert browser.find_elements(By.CSS_SELECTOR, "#chart-depth polyline.depth")
    assert "not updated" not in text_of(browser, "updated")
    browser.save_screenshot(str(tmp_path / "overview.png"))
    errors = [entry for entry in browser.get_log("browser") if entry["level"] == "SEVERE"]
    assert errors == [], errors


def test_a_notice_shows_after_an_action_and_never_from_a_crafted_url(browser, dashboard,
                                                                      sqlite_store):
    store = sqlite_store()
    dead_id = make_dead(store, queue="mail")
    spoof = "/dead?notice=retry&count=0.+ALERT:+all+jobs+lost,+call+IT+at+evil.example;"
    browser.get(dashboard.url + spoof)   # a link anyone may send, before and after a login
    assert text_of(browser, "notice") == "" and "ALERT" not in browser.page_source
    log_in(browser, dashboard)
    browser.get(dashboard.url + spoof)
    assert text_of(browser, "notice") == "" and "ALERT" not in browser.page_source
    browser.get(dashboard.url + f"/jobs/{dead_id}")
    browser.find_element(By.ID, "retry").click()
    wait_for_notice(browser, "Retried 1 job(s).")
    assert "?" not in browser.current_url and "ALERT" not in browser.page_source
    assert store.get(dead_id)["status"] == "ready"
    browser.refresh()   # shown once: a reload says nothing more
    wait_until(lambda: browser.find_elements(By.ID, "fields"), message="the job page again")
    assert text_of(browser, "notice") == ""
    assert_inert(browser)
