"""The store contract (PRODUCT.md, points 1-3 and 5-7) as a model-checked property.

StoreMachine, a hypothesis RuleBasedStateMachine, drives random sequences of
enqueues (with and without keys, delayed, prioritized, on several queues),
batched claims by several workers (on two connections) of several supervisors,
completions (one, many, with the next claim, in job.transaction()), failures
(retry, permanent, out of attempts), releases, extensions, lease expiry and
recovery, supervisor pruning, hand-backs after a worker's death, retry and
discard of dead jobs and pause/resume against the REAL store, and after every
step checks the whole store against a plain in-memory model
(store_model_state.Model): every job in the state the model says, with its
attempts (never above max_attempts), crashes and lease token; no job claimed
twice under live leases; a stale lease never completes, fails, extends, releases
or hands back a job; an idempotent enqueue returns the same id; counts(),
queue_stats(), dead_jobs() and ready_count() agree with the model. The rules of
a job's life cycle are in store_model_rules.py; the operators' rules and the
check are here.

Time without sleeping. No clock the store reads is touched (the server's
UTC_TIMESTAMP(6) on MySQL/MariaDB, this host's on SQLite): the test moves rows
in time instead, with an UPDATE through the store's own connection
(store_model_state's statements), and the store's SQL compares them with its
own clock as it would once the time had really passed:
- claims take a lease of a day, so a lease is live until the test expires it
  by setting its lease_until to a moment of the year 2000 (a distinct second
  each, so that recovery's "oldest lease first" has one right answer);
- a delay (enqueue, retry backoff, hand-back backoff) is either 0 or at least
  7.5 days (a policy of 10 days, jittered), so a job never comes due by itself
  during a run; the test makes a delayed job due by setting its available_at
  into the year 2000;
- a supervisor goes silent when the test sets its heartbeat_at into the year
  2000; prune_silent() is asked for an hour of silence.
The model says which ready jobs are due; the claim order among them (priority,
available_at, id) uses the available_at values the store wrote, read back
after every step.

Run: tests/store/test_store_model.py (CI size, every backend), or longer:
    python tests/store_model.py --steps 20000 [--backend sqlite|mariadb|mysql]
"""
import argparse
import tempfile
import time
from contextlib import ExitStack, contextmanager

from conftest import mysql_dsn, scratch_database
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    initialize, invariant, precondition, rule, run_state_machine_as_test)
from store_model_flows import FlowModel, WorkflowRules
from store_model_rules import (
    LIMIT, QUEUE, QUEUE_LISTS, QUEUES, SUPERVISOR, WORKER, LifeCycleRules)
from store_model_state import (
    CANCELLED, COME_DUE, DEAD, GO_SILENT, READY, RESERVED, ROWS, Tally, check_row, raw, utc_now)

from prefork import config as config_module
from prefork.store import create_embedded, open_store

BACKENDS = ("sqlite", "mariadb", "mysql")   # mariadb/mysql: the `dialect` setting, on MariaDB
SILENCE = 3600.0                # prune_silent()'s threshold
MAX_SUPERVISORS = 4
CONNECTIONS = 2                 # stores (connections) on one queue: workers use them in turn


class StoreMachine(LifeCycleRules, WorkflowRules):
    """The life cycle, workflows, the operators' side (supervisors, dead jobs, pausing,
    delays that pass), and the check of the whole store against the model after every
    step (once the model's workflows moved on)."""

    def __init__(self, stores, tally):
        super().__init__(stores, tally)
        self.flows = FlowModel(self.model)

    # -- supervisors ---------------------------------------------------------------------------

    @initialize()
    def start_with_two_supervisors(self):
        for _ in range(2):
            self._register()

    def _register(self):
        process_id = self.store.register_process("h1", 1000 + len(self.model.supervisors),
                                                 QUEUES, 2, "model")
        assert process_id not in self.model.supervisors
        self.model.supervisors[process_id] = "running"

    @rule(action=st.sampled_from(("register", "heartbeat", "silence", "stop")), pick=SUPERVISOR)
    def supervisor(self, action, pick):
        """A supervisor starts, beats, goes silent (test-only: its heartbeat_at moves
        into the past) or stops cleanly."""
        process_id = self._supervisor(pick or 1)
        running = self.model.supervisors.get(process_id) == "running"
        if action == "register" or process_id is None:
            if len(self.model.supervisors) < MAX_SUPERVISORS:
                self._register()
        elif action == "heartbeat":
            assert self.store.heartbeat(process_id, QUEUES, 2, "[]") == running, "heartbeat"
            self.model.silent_since.pop(process_id, None)
        elif action == "silence":
            moment = self.model.past()
            assert raw(self.store, GO_SILENT, (moment, process_id))[1] == running
            if running:
                self.model.silent_since[process_id] = moment
        else:
            self.store.stop_process(process_id)
            if running:
                self.model.supervisors[process_id] = "stopped"
                self.model.silent_since.pop(process_id, None)

    @rule(limit=st.sampled_from((1, 10)), spared=st.one_of(st.none(), WORKER),
          silence=st.one_of(st.none(), SUPERVISOR))
    def prune_silent(self, limit, spared, silence):
        """Jobs of a silent supervisor's children come back now, but those spare() keeps.
        silence: one more supervisor goes silent first."""
        if silence is not None:
            self.supervisor("silence", silence)
        silent = sorted(self.model.silent_since, key=self.model.silent_since.get)[:limit]
        held = {process_id: [job for job in self.model.jobs.values()
                             if job.status == RESERVED and job.process_id == process_id]
                for process_id in silent}
        shown = []

        def spare(job):
            shown.append(job.job_id)
            return job.worker == spared

        pruned = self.store.prune_silent(SILENCE, limit, spare)
        returned = {process_id: [job for job in jobs if job.worker != spared]
                    for process_id, jobs in held.items()}
        assert sorted(pruned) == sorted((process_id, len(jobs))
                                        for process_id, jobs in returned.items()), "prune_silent"
        assert sorted(shown) == sorted(job.id for jobs in held.values() for job in jobs)
        for process_id, jobs in returned.items():
            self.model.supervisors[process_id] = "pruned"
            del self.model.silent_since[process_id]
            for job in jobs:
                self.model.give_back(job.id)
            self.tally["pruned jobs"] += len(jobs)

    # -- dead jobs, pausing, delays --------------------------------------------------------------

    def _ids(self, picks):
        """Job ids: even picks from the dead ones, odd ones from all."""
        ids = []
        for pick in picks:
            pool = self.model.of_status(DEAD) if pick % 2 == 0 else sorted(self.model.jobs)
            if pool:
                ids.append(pool[pick // 2 % len(pool)])
        return ids

    @rule(picks=st.lists(st.integers(0, 1000), max_size=3), every=st.booleans(),
          queue=st.one_of(st.none(), QUEUE), max_attempts=st.one_of(st.none(), st.integers(1, 3)),
          cancelled_too=st.booleans())
    def retry_dead(self, picks, every, queue, max_attempts, cancelled_too):
        ids = None if every else self._ids(picks)
        statuses = (DEAD, CANCELLED) if cancelled_too else (DEAD,)
        revived = [job_id for status in statuses for job_id in self.model.of_status(status, queue)
                   if ids is None or job_id in ids]
        assert self.store.retry_dead(ids, queue, max_attempts, statuses) == len(revived), \
            f"retry_dead {ids} {queue} {statuses}"
        for job_id in sorted(revived):   # members in id order, as the store retries them
            self.model.revive(job_id, max_attempts)
            self.flows.revive(job_id)
        self.tally["retried dead"] += len(revived)

    @rule(picks=st.lists(st.integers(0, 1000), min_size=1, max_size=4))
    def cancel(self, picks):
        """Cancel some jobs (even picks from the running ones, odd ones from all, and
        one that never was): ready ones now, running ones when they leave `reserved`."""
        ids = [self.model.max_id + 1000]
        for pick in picks:
            pool = self.model.of_status(RESERVED) if pick % 2 == 0 else sorted(self.model.jobs)
            ids += [pool[pick // 2 % len(pool)]] if pool else []
        expected = self.model.cancel(ids)
        assert self.store.cancel(ids) == expected, f"cancel {ids}"
        self.tally["cancelled"] += len(expected[0])
        self.tally["stopping"] += len(expected[1])

    @rule(picks=st.lists(st.integers(0, 1000), min_size=1, max_size=3))
    def discard_dead(self, picks):
        ids = self._ids(picks)
        gone = set(ids) & set(self.model.of_status(DEAD))
        assert self.store.discard_dead(ids) == len(gone), f"discard_dead {ids}"
        for job_id in gone:
            self.model.discard(job_id)
        self.tally["discarded"] += len(gone)

    @rule(queue=QUEUE, paused=st.booleans(), queues=QUEUE_LISTS, limit=LIMIT)
    def pause(self, queue, paused, queues, limit):
        """Pause or resume a queue; what ready_count() then sees."""
        self.store.set_paused(queue, paused)
        (self.model.paused.add if paused else self.model.paused.discard)(queue)
        assert self.store.control_state("h1")[2] == self.model.paused
        expected = sum(min(limit, len(self.model.claimable(name))) for name in queues)
        assert self.store.ready_count(queues, limit) == expected, f"ready_count {queues}"

    @precondition(lambda self: self.model.of_status(READY))
    @rule(index=st.integers(0, 1000))
    def delay_passes(self, index):
        """Test-only: a delayed job's time comes (its available_at moves into the past)."""
        delayed = [job.id for job in self.model.jobs.values()
                   if job.status == READY and not job.due]
        if delayed:
            job_id = delayed[index % len(delayed)]
            assert raw(self.store, COME_DUE, (self.model.past(), job_id))[1] == 1
            self.model.jobs[job_id].due = True

    # -- after every step -------------------------------------------------------------------------

    @invariant()
    def store_agrees_with_the_model(self):
        self.tally["checks"] += 1
        self.flows.settle()
        self.tally["released"] += len(self.flows.released)
        self.flows.released.clear()
        rows, _ = raw(self.store, ROWS)
        assert sorted(row[0] for row in rows) == sorted(self.model.jobs), "the jobs differ"
        now = utc_now()
        for row in rows:
            check_row(row, self.model.jobs[row[0]], now)
        tokens = [row[8] for row in rows if row[3] == RESERVED]
        assert len(tokens) == len(set(tokens)), "two reserved jobs share a lease token"
        assert self.store.counts() == self.model.counts()
        figures = self.store.queue_stats(QUEUES)
        for queue in QUEUES:
            figures[queue].pop("oldest_ready_age")
            assert figures[queue].pop("cancelled") == \
                len(self.model.of_status(CANCELLED, queue)), f"cancelled of {queue}"
            assert figures[queue] == self.model.figures(queue), f"queue_stats of {queue}"
        for process_id in self.model.supervisors:
            assert self.store.cancel_requested(process_id) == self.model.stopping(process_id)
        dead = self.store.dead_jobs(limit=1000)
        assert sorted(row["id"] for row in dead) == self.model.of_status(DEAD), "dead_jobs"
        assert all("payload" not in row for row in dead)


def run(stores, examples, steps, tally, **options):
    """Drive `examples` random sequences of up to `steps` steps each against `stores`,
    connections to one queue (whose tables each sequence empties first)."""
    chosen = settings(max_examples=examples, stateful_step_count=steps, deadline=None,
                      suppress_health_check=list(HealthCheck), **options)
    run_state_machine_as_test(lambda: StoreMachine(stores, tally), settings=chosen)


@contextmanager
def fresh_stores(backend, folder):
    """CONNECTIONS stores on a new, migrated database of `backend`: a SQLite file in
    `folder`, or a database on the test MariaDB server (conftest's SERVER) spoken to in dialect
    `backend`; the database is removed afterwards."""
    if backend == "sqlite":
        config = config_module.load({"dsn": f"sqlite:///{folder}/model.db"}, environ={})
        create_embedded(config)
        with opened(config) as stores:
            yield stores
        return
    with scratch_database("pq_model") as name:
        config = config_module.load({"dsn": mysql_dsn(name), "dialect": backend}, environ={})
        with opened(config) as stores:
            stores[0].migrate()
            yield stores


@contextmanager
def opened(config):
    """CONNECTIONS stores opened with `config`, closed afterwards."""
    with ExitStack() as stack:
        stores = []
        for _ in range(CONNECTIONS):
            stores.append(open_store(config))
            stack.callback(stores[-1].close)
        yield stores


def main(argv=None):
    parser = argparse.ArgumentParser(description="Check the real store against the model "
                                     "for a number of random steps, per backend.")
    parser.add_argument("--steps", type=int, default=20000, help="steps per backend")
    parser.add_argument("--backend", choices=BACKENDS, action="append",
                        help="sqlite, mariadb or mysql (the dialect, on the MariaDB at "
                        "PREFORK_TEST_DB_HOST:PORT); repeat for several; default: all")
    parser.add_argument("--steps-per-sequence", type=int, default=50)
    args = parser.parse_args(argv)
    for backend in args.backend or BACKENDS:
        tally, started = Tally(), time.monotonic()
        with tempfile.TemporaryDirectory() as folder, fresh_stores(backend, folder) as stores:
            while tally.steps < args.steps:
                left = args.steps - tally.steps
                run(stores, max(1, left // args.steps_per_sequence), args.steps_per_sequence,
                    tally)
        print(f"{backend}: {tally.steps} steps in {tally['examples']} sequences, "
              f"{time.monotonic() - started:.1f} s, nothing found; {tally.summary()}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

