"""The dialect-neutral half of the dashboard's reads (prefork/store/job_search.py):
which index a filter reads, key prefixes as LIKE patterns and as ranges, pages
merged from several reads, a queue's overview put together."""
from datetime import datetime

import pytest

from prefork.errors import UserError
from prefork.jobs import JobStatus
from prefork.store import job_search
from prefork.store.job_search import Path
from prefork.store.views import JobFilter, JobPage, QueueOverview


@pytest.mark.parametrize("job_filter, path", [
    (JobFilter(), Path.STATUS), (JobFilter(status=JobStatus.DEAD), Path.STATUS),
    (JobFilter(queue="q"), Path.QUEUE), (JobFilter(queue="q", job_type="t"), Path.TYPE),
    (JobFilter(key_prefix="k"), Path.KEY_ONLY), (JobFilter(key_prefix="k", queue="q"), Path.KEY),
    (JobFilter(key_prefix=""), Path.STATUS), (JobFilter(job_id=3, key_prefix="k"), Path.ID)])
def test_each_filter_reads_its_most_selective_index(job_filter, path):
    assert job_search.path_of(job_filter) is path


def test_without_a_state_each_state_is_read():
    assert job_search.statuses_to_read(JobFilter(), Path.STATUS) == list(JobStatus)
    assert job_search.statuses_to_read(JobFilter(status=JobStatus.DONE), Path.QUEUE) == ["done"]
    assert job_search.statuses_to_read(JobFilter(), Path.KEY) == [None]


def test_a_key_prefix_is_literal_in_like():
    assert job_search.like_pattern("50%_a!b") == "50!%!_a!!b%"
    assert job_search.like_pattern(None) is None


@pytest.mark.parametrize("prefix, high", [
    ("abc", "abd"), ("a\U0010ffff", "b"), ("\U0010ffff\U0010ffff", None),
    ("x\ud7ff", "x\ue000")])
def test_a_key_prefix_is_a_range_up_to_its_successor(prefix, high):
    assert job_search.key_range(prefix) == (prefix, high)


def row(job_id):
    return {"id": job_id}


def test_reads_merge_into_the_newest_page_with_a_cursor_when_more_remain():
    page = job_search.merge_page([[row(9), row(4), row(1)], [row(8), row(7), row(2)]], 3)
    assert page == JobPage([row(9), row(8), row(7)], 7)
    assert job_search.merge_page([[row(5)], [row(3)]], 3) == JobPage([row(5), row(3)], None)


@pytest.mark.parametrize("limit", [0, 501])
def test_a_page_size_out_of_bounds_is_refused(limit):
    with pytest.raises(UserError, match="page size"):
        job_search.check_limit(limit)


def test_an_overview_joins_live_counts_states_and_the_rollup():
    live = [("mail", "ready", 1, 3, 12.5), ("mail", "ready", 0, 2, -30.0),
            ("mail", "reserved", 1, 1, 40.0), ("mail", "dead", 1, 7, None)]
    overviews = job_search.overviews(live, [("idle", 1)], [("mail", 50, 4, 10)])
    assert overviews == [
        QueueOverview("idle", 0, 0, 0, 0, 0, 0, 0.0, None, True),
        QueueOverview("mail", 3, 2, 1, 7, 50, 4, 2.0, 12.5, False)]


def test_the_rollup_window_is_the_last_hour_and_the_whole_minutes_before_this_one():
    window = job_search.rollup_window(datetime(2026, 1, 1, 12, 30, 45))
    assert window == {"hour_ago": datetime(2026, 1, 1, 11, 30),
                      "recent_from": datetime(2026, 1, 1, 12, 25),
                      "current": datetime(2026, 1, 1, 12, 30)}
