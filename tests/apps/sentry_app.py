"""Handlers for tests/contrib/test_sentry.py: a failure chained from another, whose
messages never quote the payload (so that a report holding the payload shows it)."""
import prefork


@prefork.handler("sentry.flaky", backoff=0)
def flaky(job):
    try:
        raise KeyError("lookup detail")
    except KeyError as exc:
        raise ValueError("upstream said no") from exc
