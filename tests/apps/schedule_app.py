"""Handlers for schedule tests: the job a schedule enqueues, doing nothing."""
import prefork


@prefork.handler("scheduled_tick")
def scheduled_tick(job):
    """Nothing to do: the tests read the enqueued keys."""
