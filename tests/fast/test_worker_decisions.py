"""The worker's pure decisions: how many jobs to claim at once."""
import time

from prefork.config import load
from prefork.worker.loop import HOLD_BUDGET, Worker, batch_size


def test_fast_jobs_are_claimed_in_batches_that_fit_the_hold_budget():
    assert batch_size(HOLD_BUDGET / 10, claim_batch=32) == 10
    assert batch_size(HOLD_BUDGET / 1000, claim_batch=32) == 32   # within claim_batch


def test_slow_jobs_are_claimed_one_at_a_time():
    assert batch_size(HOLD_BUDGET, claim_batch=32) == 1
    assert batch_size(HOLD_BUDGET * 100, claim_batch=32) == 1


def test_a_batch_never_exceeds_what_is_left_to_run():
    assert batch_size(HOLD_BUDGET / 1000, claim_batch=32, left=3) == 3
    assert batch_size(HOLD_BUDGET / 1000, claim_batch=32, left=None) == 32
    assert batch_size(HOLD_BUDGET / 1000, claim_batch=32, left=0) == 1   # at least one


def test_instant_jobs_do_not_divide_by_zero():
    assert batch_size(0.0, claim_batch=64) == 64


def test_the_first_jobs_time_sizes_the_second_claim():
    # Before any job the worker claims one; that job's time replaces the guess (a
    # running average started at the hold budget took five claims to reach a batch).
    worker = Worker(store=None, config=load(environ={}))
    assert worker.batch_size() == 1
    worker.time_job(time.monotonic() - HOLD_BUDGET / 16)
    first = worker.batch_size()
    assert 8 <= first <= 16   # ~16 of that job fit the budget (the clock moves on meanwhile)
    worker.time_job(time.monotonic() - HOLD_BUDGET / 4)   # a slower one weighs in, averaged
    assert 4 <= worker.batch_size() < first
