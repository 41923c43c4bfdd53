"""Handlers for tests/worker/test_errors.py: failures an operator must be able to read,
and job types with their own retry rules."""
import os

import prefork

ALWAYS_NOW = 0   # backoff: retries are due at once, so one `work --stop-when-empty` runs them


@prefork.handler("errors.billing", backoff=ALWAYS_NOW)
def billing(job):
    raise ValueError(f"customer {job.payload['customer']} has no billing address")


@prefork.handler("errors.invoice", backoff=ALWAYS_NOW)
def invoice(job):
    """Writes into the application's own table, which the worker account may not."""
    with job.transaction() as cursor:
        cursor.execute("INSERT INTO invoices (job_id) VALUES (%s)", (job.id,))


@prefork.handler("errors.leaky", backoff=ALWAYS_NOW)
def leaky(job):
    """A message quoting the database password, bare and inside a URL."""
    secret = os.environ["ERRORS_APP_SECRET"]
    raise RuntimeError(f"login with {secret} refused by mysql://queue_worker:{secret}@db/app")


@prefork.handler("errors.picky", retry_on=(TimeoutError,), discard_on=(KeyError,),
                 backoff=ALWAYS_NOW)
def picky(job):
    """Fails with the exception payload['raise'] names."""
    raise {"timeout": TimeoutError, "key": KeyError, "value": ValueError}[job.payload["raise"]](
        "picky failed")


@prefork.handler("errors.capped", max_attempts=2, backoff=lambda attempt: 0)
def capped(job):
    raise ConnectionError("upstream down")
