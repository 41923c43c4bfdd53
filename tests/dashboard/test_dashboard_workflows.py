"""The dashboard's workflow pages over real HTTP, against a real `prefork-queue
dashboard` process on MariaDB and on SQLite: the list of workflows by state and a
page per workflow (its progress, callbacks and members by outcome, keyset paged),
a job's page naming its workflow, the actions (retry the dead jobs, which resumes
the workflow; cancel the rest) behind the password, the session, the Origin and
the CSRF token, and what must be refused (bad ids, unknown states, cross-site
posts) refused with the usual headers, nothing changed. Hostile data renders
inert; one check runs in a real browser."""
import re

from conftest import wait_until
from dashboard_helpers import PASSWORD, WORKER, DashboardProcess, assert_secured
from dashboard_helpers import dashboard, queue_store  # noqa: F401  (pytest fixtures)
from selenium.webdriver.common.by import By
from test_dashboard_browser import assert_inert, log_in, text_of, wait_for_notice
from test_dashboard_browser import browser  # noqa: F401  (a pytest fixture)

import prefork
from prefork.retry import Decision
from prefork.workflows.plan import plan_batch, plan_flow

job = prefork.job
DEAD = Decision(dead=True, delay=0)
HOSTILE = '<script>alert("x")</script><img id="injected" src=x onerror=alert(1)>'
PAGE_SIZE = 50   # dashboard/data.py's
MEMBER_STEP = re.compile(r"<tr><td>(\d+)</td><td><a href=\"/(jobs|workflows)/(\d+)\"")
LISTED = re.compile(r'<tr><td><a href="/workflows/(\d+)">')


def enqueue(store, flow, key=None):
    return store.enqueue_workflow(plan_flow(flow), key)


def claim(store, queue="default", limit=1):
    return store.claim([queue], WORKER, 60, limit=limit)


def complete(store, queue="default", count=1):
    """Claim and complete `count` jobs of `queue`; their ids."""
    claimed = claim(store, queue, count)
    assert store.complete_many([each.lease for each in claimed]) == {each.id for each in claimed}
    return [each.id for each in claimed]


def kill(store, queue="default", error="PlannedFailure"):
    """Claim the next job of `queue` and fail it for good; its id."""
    [claimed] = claim(store, queue)
    assert store.fail(claimed, error, DEAD)
    return claimed.id


def statuses(store, ids):
    return [store.get(job_id)["status"] for job_id in ids]


def members_of(client, workflow_id, **query):
    """Every member a workflow's page lists, following its `next` links: [(step, kind,
    id)], and the number of pages."""
    seen, pages, after = [], 0, None
    while True:
        answer = client.get(f"/workflows/{workflow_id}",
                            **query, **({} if after is None else {"after": after}))
        assert answer.status == 200, answer.text
        table = answer.text.split('id="member-rows"', 1)[1].split("</table>", 1)[0]
        seen += [(int(step), kind, int(ident)) for step, kind, ident in MEMBER_STEP.findall(table)]
        pages += 1
        following = re.search(r'id="next" href="[^"]*after=(\d+)"', answer.text)
        if following is None:
            return seen, pages
        after = following.group(1)


# -- the pages ----------------------------------------------------------------------------------

def test_a_workflows_page_shows_its_progress_callbacks_and_members(dashboard, queue_store):
    store = queue_store
    flow = enqueue(store, prefork.chain(
        job("order.charge", {"order": 7}),
        prefork.group([job("mail.send"), prefork.chain(job("pdf.make"), job("pdf.send")),
                       job("sms.send")], then=job("order.close")),
        job("order.archive")), key="order-7")
    charge, mail, make, send, sms, close, archive = flow.job_ids
    batch = store.enqueue_workflow(plan_batch(job("import.report"), job("import.cleanup")))
    plain = store.enqueue(prefork.jobs.new_job("plain.job", {}, queue="plain"))
    assert complete(store) == [charge]   # step 0 done: the group runs
    assert kill(store) == mail           # one of its members dead
    client = dashboard().client()

    page = client.get(f"/workflows/{flow.id}")
    assert page.status == 200 and page.headers["content-type"].startswith("text/html")
    assert_secured(page)
    assert "Chain " + str(flow.id) in page.text and 'id="state">running<' in page.text
    assert "total 3, done 1, dead 0, cancelled 0, pending 2" in page.text
    assert "step</th><td>2 of 3" in page.text and "order-7" in page.text
    steps, _ = members_of(client, flow.id)
    assert [(step, kind) for step, kind, _ in steps] == [(0, "jobs"), (1, "workflows"),
                                                          (2, "jobs")]
    assert (steps[0][2], steps[2][2]) == (charge, archive)

    # The group with its callback is a chain of the group and the callback.
    callback_chain = steps[1][2]
    [(_, _, group_id), (_, _, close_id)] = members_of(client, callback_chain)[0]
    assert close_id == close
    group_page = client.get(f"/workflows/{group_id}").text
    assert "Group " + str(group_id) in group_page
    assert "total 3, done 0, dead 1, cancelled 0, pending 2" in group_page
    assert f'<a href="/workflows/{callback_chain}">chain {callback_chain}</a>, step 0' in group_page
    assert f'(outermost: <a href="/workflows/{flow.id}">' in group_page
    # What runs after it: the next step of its chain, the group's callback.
    callbacks = group_page.split('id="callbacks"', 1)[1].split("</table>", 1)[0]
    assert f'next: step 1 of <a href="/workflows/{callback_chain}">' in callbacks
    assert f'href="/jobs/{close}">job {close}</a>' in callbacks and ">waiting<" in callbacks
    members = members_of(client, group_id)[0]
    assert [(step, ident) for step, _, ident in members][0::2] == [(0, mail), (2, sms)]
    assert members_of(client, group_id, show="dead")[0] == [(0, "jobs", mail)]
    assert [ident for _, _, ident in members_of(client, group_id, show="pending")[0]] == \
        [members[1][2], sms]
    assert members_of(client, group_id, show="done")[0] == []

    batch_page = client.get(f"/workflows/{batch.id}").text
    assert "Batch " + str(batch.id) in batch_page and "yes: it takes new members" in batch_page
    callbacks = batch_page.split('id="callbacks"', 1)[1]
    report, cleanup = batch.job_ids
    assert callbacks.index(f">job {report}<") < callbacks.index(f">job {cleanup}<")
    assert "on_success: once every member is done" in callbacks
    assert "on_complete: once every member has ended" in callbacks

    # A member's page names its place; a plain job's names none.
    made = client.get(f"/jobs/{make}").text
    place = re.search(r'<p id="workflow-place">(.*?)</p>', made).group(1)
    assert place.startswith("Step 0 of <a href=\"/workflows/") and f"/workflows/{flow.id}" in place
    assert "The on_success callback of" in client.get(f"/jobs/{report}").text
    assert "workflow-place" not in client.get(f"/jobs/{plain}").text

    listed = client.get("/workflows")
    assert listed.status == 200
    assert LISTED.findall(listed.text) == [str(batch.id), str(flow.id)]   # outermost only
    assert client.get("/workflows", state="running").status == 200
    assert LISTED.findall(client.get("/workflows", state="dead").text) == []
    opened = client.get("/workflows", id=str(group_id))
    assert opened.status == 303 and opened.headers["location"] == f"/workflows/{group_id}"
    assert "/workflows" in client.get("/").text   # the navigation names the page


def test_members_page_by_step_with_no_gap_or_repeat(dashboard, queue_store):
    store = queue_store
    members = [prefork.chain(job("c.one"), job("c.two")) if n % 10 == 3 else job("g.member")
               for n in range(2 * PAGE_SIZE + 17)]
    flow = enqueue(store, prefork.group(members))
    for _ in range(7):
        kill(store)
    complete(store, count=20)
    client = dashboard().client()

    listed, pages = members_of(client, flow.id)
    assert [step for step, _, _ in listed] == list(range(len(members))) and pages == 3
    assert sum(kind == "workflows" for _, kind, _ in listed) == 12
    # Killed in id order: steps 0 to 6, the chain at step 3 stopped by its first step.
    dead, _ = members_of(client, flow.id, show="dead")
    assert [(step, kind) for step, kind, _ in dead] == \
        [(step, "workflows" if step == 3 else "jobs") for step in range(7)]
    # The 20 completed: steps 7 to 26, the chains at 13 and 23 running their second step.
    progress = store.workflow_progress(flow.id)
    assert (progress.dead, progress.done, progress.pending) == (7, 18, len(members) - 25)
    pending, _ = members_of(client, flow.id, show="pending")
    assert [step for step, _, _ in pending] == [13, 23] + list(range(27, len(members)))
    page = client.get(f"/workflows/{flow.id}").text
    assert f"pending ({len(members) - 25})" in page and "dead (7)" in page


def test_the_list_pages_ended_workflows_last_ended_first(dashboard, queue_store):
    store = queue_store
    flows = [enqueue(store, prefork.group([job("one.job", {"n": n})]), key=f"flow-{n}")
             for n in range(PAGE_SIZE + 5)]
    finished = [complete(store)[0] for _ in flows]   # in id order, one by one
    running = enqueue(store, prefork.group([job("still.running")]))
    client = dashboard().client()

    def listed(**query):
        seen, after = [], None
        while True:
            answer = client.get("/workflows", **query, **({} if after is None else
                                                            {"after": after}))
            assert answer.status == 200, answer.text
            seen += [int(ident) for ident in LISTED.findall(answer.text)]
            older = re.search(r'id="older" href="[^"]*after=(\d+)"', answer.text)
            if older is None:
                return seen
            after = older.group(1)

    by_job = {flow.job_ids[0]: flow.id for flow in flows}
    assert listed(state="done") == [by_job[job_id] for job_id in reversed(finished)]
    assert listed(state="running") == [running.id]
    assert listed() == [running.id] + [flow.id for flow in reversed(flows)]
    assert listed(state="cancelled") == []


# -- the actions ----------------------------------------------------------------------------------

def test_retry_dead_resumes_the_workflow_and_cancel_ends_the_rest(dashboard, queue_store):
    store = queue_store
    flow = enqueue(store, prefork.chain(job("a.step"), prefork.group([job("b.one"), job("b.two")]),
                                        job("c.step")))
    a, b_one, b_two, c = flow.job_ids
    complete(store)
    kill(store)
    complete(store)   # the group ends dead, and stops the chain: c waits
    assert store.workflow_progress(flow.id).state == "dead"
    assert statuses(store, [b_one, b_two]) == ["dead", "done"]
    client = dashboard(password=PASSWORD).client()
    token = client.log_in()
    page = client.get(f"/workflows/{flow.id}").text
    assert 'id="retry-dead"' in page and 'id="cancel-rest"' not in page

    answer = client.post("/workflows/retry", {"id": flow.id, "csrf": token})
    assert answer.status == 303 and answer.headers["location"] == f"/workflows/{flow.id}"
    assert f"Retried 1 dead job(s) of workflow {flow.id}." in client.get(f"/workflows/{flow.id}").text
    assert statuses(store, [b_one]) == ["ready"]
    assert store.workflow_progress(flow.id).state == "running"   # resumed
    complete(store)   # the retried member: the group passes, c is released
    assert statuses(store, [c]) == ["ready"]

    # Cancel the rest of a second workflow: a running member is stopped, a ready
    # one and the waiting callback cancelled; the callback of a group that passes
    # on its members' ends is never released.
    other = enqueue(store, prefork.group([job("x.one", queue="other"), job("x.two", queue="other")],
                                         then=job("x.then", queue="other"), policy="ended"))
    x_one, x_two, x_then = other.job_ids
    [running] = claim(store, "other")
    page = client.get(f"/workflows/{other.id}").text
    assert 'id="cancel-rest"' in page and 'id="retry-dead"' not in page
    answer = client.post("/workflows/cancel", {"id": other.id, "csrf": token})
    assert answer.status == 303
    notice = client.get(f"/workflows/{other.id}").text
    assert f"Cancelled 2 job(s) of workflow {other.id}; 1 running job(s) are being stopped." in notice
    assert statuses(store, [x_then]) == ["cancelled"]
    assert store.get(running.id)["cancel_requested_at"] is not None
    assert statuses(store, [x_one, x_two]).count("cancelled") == 1
    assert store.finish_cancelled(running.lease)
    assert statuses(store, other.job_ids) == ["cancelled"] * 3
    assert store.workflow_progress(other.id).state == "cancelled"
    assert store.workflow_progress(flow.id).state == "running"   # the first one untouched
    assert claim(store, "other") == []

    # A batch's callbacks have lower ids than its members: cancelled first, as
    # everything waiting is, they are never released by the members' cancels.
    batch = store.enqueue_workflow(plan_batch(None, job("b.complete", queue="batch")))
    added = store.add_to_batch(batch.id, [job("b.one", queue="batch"), job("b.two", queue="batch")])
    store.close_batch(batch.id)
    assert client.post("/workflows/cancel", {"id": batch.id, "csrf": token}).status == 303
    assert statuses(store, batch.job_ids + added) == ["cancelled"] * 3
    assert claim(store, "batch") == []


def test_refused_requests_change_nothing_and_keep_the_headers(dashboard, queue_store):
    store = queue_store
    flow = enqueue(store, prefork.group([job("r.one"), job("r.two")]))
    dead = kill(store)
    read_only = dashboard().client()
    text = read_only.get(f"/workflows/{flow.id}").text
    assert 'method="post"' not in text and "Retry dead" not in text and "read-only" in text
    assert read_only.post("/workflows/retry", {"id": flow.id}).status == 403

    client = dashboard(password=PASSWORD).client()
    assert 'id="retry-dead"' not in client.get(f"/workflows/{flow.id}").text   # not logged in
    assert client.post("/workflows/retry", {"id": flow.id}).status == 403
    token = client.log_in()
    refused = [
        client.post("/workflows/retry", {"id": flow.id}),                         # no token
        client.post("/workflows/cancel", {"id": flow.id, "csrf": token[:-2] + "xx"}),
        client.post("/workflows/retry", {"id": flow.id, "csrf": token}, origin="http://evil.example"),
        client.post("/workflows/cancel", {"id": flow.id, "csrf": token}, origin=None),
    ]
    assert [answer.status for answer in refused] == [403] * 4
    for form, status in (({"id": "12x"}, 400), ({"id": ""}, 400), ({"id": "-1"}, 400),
                         ({"id": str(2 ** 63)}, 400), ({"id": "999999"}, 404)):
        answer = client.post("/workflows/cancel", {**form, "csrf": token})
        assert answer.status == status, (form, answer.text)
        assert_secured(answer)
        assert re.search(r'id="problem">[^<\n]+</p>', answer.text), answer.text
    assert client.get("/workflows/retry").status == 405
    for path, query, status in (("/workflows/999999", {}, 404), ("/workflows/abc", {}, 404),
                                (f"/workflows/{2 ** 63}", {}, 404),
                                (f"/workflows/{flow.id}", {"show": "sleeping"}, 400),
                                (f"/workflows/{flow.id}", {"after": "-3"}, 400),
                                ("/workflows", {"state": "sleeping"}, 400),
                                ("/workflows", {"after": "x"}, 400),
                                ("/workflows", {"id": "<b>"}, 400)):
        answer = client.get(path, **query)
        assert answer.status == status, (path, query, answer.text)
        assert_secured(answer)
    assert statuses(store, flow.job_ids).count("dead") == 1 and store.get(dead)["status"] == "dead"
    assert store.workflow_progress(flow.id).dead == 1


def test_hostile_data_renders_as_text(dashboard, queue_store, db):
    store = queue_store
    flow = enqueue(store, prefork.group([job("h.one"), job("h.two")], then=job("h.then")),
                   key=HOSTILE)
    dead = kill(store, error=HOSTILE)
    db.execute("UPDATE prefork_jobs SET job_type = %s WHERE id = %s", (HOSTILE, dead))
    client = dashboard().client()
    pages = [client.get("/workflows").text, client.get(f"/workflows/{flow.id}").text]
    group_id = store.workflow_place(dead).workflow_id
    pages.append(client.get(f"/workflows/{group_id}").text)
    for text in pages:
        assert HOSTILE not in text and "<img" not in text
    assert "&lt;script&gt;" in pages[0] and "&lt;script&gt;" in pages[2]


# -- in a browser ------------------------------------------------------------------------------------

def test_in_a_browser_a_job_leads_to_its_workflow_whose_dead_are_retried(browser,
                                                                         sqlite_migrated,
                                                                         sqlite_store, tmp_path):
    store = sqlite_store()
    flow = enqueue(store, prefork.group([job("v.one"), job("v.two")], then=job("v.then")),
                   key=HOSTILE)
    dead = kill(store, error=HOSTILE)
    group_id = store.workflow_place(dead).workflow_id
    with DashboardProcess(sqlite_migrated, password=PASSWORD) as dashboard:
        log_in(browser, dashboard)
        browser.get(dashboard.url + f"/jobs/{dead}")
        browser.find_element(By.CSS_SELECTOR, "#workflow-place a").click()
        wait_until(lambda: "dead 1" in text_of(browser, "counts"), message="the workflow's page")
        assert browser.current_url.endswith(f"/workflows/{group_id}")
        browser.find_element(By.ID, "retry-dead").click()
        wait_for_notice(browser, f"Retried 1 dead job(s) of workflow {group_id}.")
        assert store.get(dead)["status"] == "ready" and "dead 0" in text_of(browser, "counts")
        for path in ("/workflows", f"/workflows/{flow.id}", f"/workflows/{group_id}"):
            browser.get(dashboard.url + path)
            assert_inert(browser)
        assert HOSTILE in text_of(browser, "member-rows")   # the dead job's last error
        browser.save_screenshot(str(tmp_path / "workflow.png"))
