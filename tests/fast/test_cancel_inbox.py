"""A child's cancel inbox (worker/cancellation.py), through a real pipe: JobCancelled
reaches the handler of the job named and never another, however late the id comes;
a cancelled job held in the batch does not start."""
import os

import pytest

from prefork.errors import JobCancelled
from prefork.jobs import Job
from prefork.worker.cancellation import CancelInbox, cancel_line, read_ids, signal_handler


def job(job_id):
    return Job(job_id, "t", "default", "{}", 1, 5, None, f"token-{job_id}")


@pytest.fixture
def pipe():
    read_fd, write_fd = os.pipe()
    os.set_blocking(read_fd, False)
    yield read_fd, write_fd
    os.close(read_fd)
    os.close(write_fd)


def send(pipe, *job_ids):
    os.write(pipe[1], b"".join(cancel_line(job_id) for job_id in job_ids))


def test_the_lines_round_trip_and_an_empty_pipe_reads_nothing(pipe):
    assert read_ids(pipe[0]) == []
    send(pipe, 1, 2 ** 63 - 1, 42)
    assert read_ids(pipe[0]) == [1, 2 ** 63 - 1, 42]
    assert read_ids(pipe[0]) == []


def test_the_running_job_named_is_interrupted_once(pipe):
    inbox = CancelInbox(pipe[0])
    handler = signal_handler(inbox, held=lambda: [], running_handler=lambda: True)
    inbox.start(job(7), held=[])
    send(pipe, 7)
    with pytest.raises(JobCancelled):
        handler(0, None)
    send(pipe, 7)   # told twice: raised once
    handler(0, None)


def test_an_id_of_another_job_interrupts_nothing(pipe):
    """The id came late: its job ended and the next began."""
    inbox = CancelInbox(pipe[0])
    handler = signal_handler(inbox, held=lambda: [], running_handler=lambda: True)
    inbox.start(job(7), held=[])
    inbox.start(job(8), held=[])
    send(pipe, 7)
    handler(0, None)
    inbox.check()   # job 8 starts
    assert not inbox.current_cancelled


def test_a_job_cancelled_between_its_start_and_its_handler_does_not_run(pipe):
    inbox = CancelInbox(pipe[0])
    handler = signal_handler(inbox, held=lambda: [], running_handler=lambda: False)
    inbox.start(job(7), held=[])
    send(pipe, 7)
    handler(0, None)   # not in the handler yet: nothing raised in the worker's code
    with pytest.raises(JobCancelled):
        inbox.check()


def test_a_held_job_cancelled_does_not_start_and_the_others_do(pipe):
    inbox = CancelInbox(pipe[0])
    held = [job(8), job(9)]
    handler = signal_handler(inbox, held=lambda: held, running_handler=lambda: True)
    inbox.start(job(7), held=held)
    send(pipe, 9)
    handler(0, None)   # job 7 runs on
    inbox.start(held.pop(0), held=held)
    inbox.check()       # job 8 starts
    inbox.start(held.pop(0), held=held)
    with pytest.raises(JobCancelled):
        inbox.check()   # job 9 does not


def test_a_held_job_given_back_is_forgotten_if_claimed_again(pipe):
    """Retried and claimed again by the same child, a job once cancelled runs."""
    inbox = CancelInbox(pipe[0])
    held = [job(9)]
    handler = signal_handler(inbox, held=lambda: held, running_handler=lambda: True)
    inbox.start(job(7), held=held)
    send(pipe, 9)
    handler(0, None)
    held.clear()                 # given back after a slow job
    inbox.start(job(8), held=[])
    inbox.start(job(9), held=[])
    inbox.check()


def test_without_a_pipe_nothing_is_ever_cancelled():
    inbox = CancelInbox()
    inbox.start(job(7), held=[])
    assert not inbox.receive([])
    inbox.check()


def test_handed_a_job_still_in_the_pipe_is_cancelled_when_it_starts(pipe):
    """Handed its jobs by the parent, a child may hear of a job's cancel before it has
    read the job itself: the id is kept, and the job does not run when it starts. A
    worker that claims for itself forgets such an id (a job over, not one to come)."""
    handed = CancelInbox(pipe[0], handed=True)
    handler = signal_handler(handed, held=lambda: [], running_handler=lambda: True)
    handed.start(job(7), held=[])
    send(pipe, 9)   # job 9 is in the job pipe, unread
    handler(0, None)   # job 7 runs on
    handed.start(job(9), held=[])
    with pytest.raises(JobCancelled):
        handed.check()
    claiming = CancelInbox(pipe[0])
    handler = signal_handler(claiming, held=lambda: [], running_handler=lambda: True)
    claiming.start(job(7), held=[])
    send(pipe, 9)
    handler(0, None)
    claiming.start(job(9), held=[])
    claiming.check()


def test_handed_the_ids_kept_are_bounded(pipe):
    from prefork.worker.cancellation import KEPT_UNKNOWN
    inbox = CancelInbox(pipe[0], handed=True)
    handler = signal_handler(inbox, held=lambda: [], running_handler=lambda: False)
    for start in range(0, 3 * KEPT_UNKNOWN, 500):
        send(pipe, *range(start + 1000, start + 1500))
        handler(0, None)
    inbox.start(job(1), held=[])
    assert len(inbox.held_cancelled) <= KEPT_UNKNOWN
