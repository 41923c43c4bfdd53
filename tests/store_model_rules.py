"""The job life cycle's rules of the store's model-checked property (see
store_model.py): enqueue, claim, complete (one, many, in job.transaction(), with
the next claim), fail, release, extend, lease expiry and recovery, hand-back,
ending a stopped job cancelled.
Each rule asks the model what the contract allows, runs the real store and
compares; the machine in store_model.py adds the operators' rules and the check
of the whole store after every step."""
from datetime import timedelta

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, precondition, rule
from store_model_state import (
    CANCELLED, CLEAR, DEAD, EXPIRE_LEASE, NEW_ROWS, PAST, READY, RESERVED, Model, as_time, raw,
    utc_now)

from prefork.errors import LeaseLost
from prefork.jobs import new_job
from prefork.retry import RetryPolicy

QUEUES = ("a", "b", "c")
WORKERS = ("h1:101", "h1:102", "h2:201")
LEASE = 86400.0                 # live until the test expires it
FAR = 10 * 86400.0              # a delay that never passes during a run (7.5 days jittered)

QUEUE = st.sampled_from(QUEUES)
QUEUE_LISTS = st.lists(QUEUE, min_size=1, max_size=3, unique=True)   # tried in this order
KEY = st.one_of(st.none(), st.sampled_from(("k1", "k2", "k3")))
# When a new job is due: now, after a delay, or at a run_at long past or far ahead.
WHEN = ("now", "delay", "run_at past", "run_at ahead")
# (queue, key, when, priority, max_attempts, job type)
JOB_SPECS = st.tuples(QUEUE, KEY, st.sampled_from(WHEN), st.sampled_from((-1, 0, 5)),
                      st.integers(1, 3), st.sampled_from(("t.a", "t.b")))
# A lease to use: (index, which): one the model says is still held, a stale one
# whose job another lease holds now, or any lease handed out so far.
PICK = st.tuples(st.integers(0, 1000), st.sampled_from(("held", "superseded", "any")))
PICKS = st.lists(PICK, min_size=1, max_size=4)
WORKER = st.sampled_from(WORKERS)
SUPERVISOR = st.sampled_from((1, 2, 0, 3, 4))   # registered ones, by number; 0: none
LIMIT = st.integers(1, 3)
DELAY = st.sampled_from((0.0, FAR))            # of a retry's or hand-back's backoff


class LifeCycleRules(RuleBasedStateMachine):
    """The rules of a job's life cycle."""

    def __init__(self, stores, tally):
        """stores: connections to one queue; the first is the supervisors' and the
        operator's, and the workers use them in turn (see _on)."""
        super().__init__()
        self.stores, self.store, self.tally, self.model = stores, stores[0], tally, Model()
        self.leases = []    # every Job a claim handed out in this sequence, held or stale
        self.claimed_on = {}   # lease -> the store (connection) of the worker that claimed it
        tally["examples"] += 1
        for statement in CLEAR:   # cheaper than a new database per sequence
            raw(self.store, statement)

    # -- choosing ------------------------------------------------------------------------

    def _new(self, spec):
        queue, key, when, priority, max_attempts, kind = spec
        run_at = {"run_at past": PAST, "run_at ahead": utc_now() + timedelta(seconds=FAR)}
        return new_job(kind, {"n": len(self.model.jobs)}, queue=queue, key=key,
                       delay=FAR if when == "delay" else 0, run_at=run_at.get(when),
                       priority=priority, max_attempts=max_attempts)

    def _lease(self, pick):
        index, which = pick
        pool = {"held": [job for job in self.leases if self.model.holder(job.lease)],
                "superseded": self._superseded(), "any": self.leases}[which] or self.leases
        return pool[index % len(pool)]

    def _leases(self, picks):
        return list({job.lease: job for job in map(self._lease, picks)}.values())

    def _on(self, worker):
        """The store (connection) a worker uses."""
        return self.stores[WORKERS.index(worker) % len(self.stores)]

    def _supervisor(self, pick):
        ids = sorted(self.model.supervisors)
        return ids[(pick - 1) % len(ids)] if pick and ids else None

    def _took(self, jobs, worker, process_id):
        for job in jobs:
            was = self.model.jobs[job.id]
            assert was.status == READY, f"job {job.id} claimed while {was.status}"
            assert len(job.lease_token) == 32 and job.lease_token not in self.model.tokens
            assert job.lease.in_workflow == self.flows.member(job.id), f"job {job.id}'s token"
            assert (job.queue, job.type, job.payload_text, job.idempotency_key, job.attempt,
                    job.max_attempts, job.crashes) == (
                was.queue, was.type, was.payload, was.key, was.attempts + 1,
                was.max_attempts, was.crashes), f"job {job.id} as claimed"
            self.model.reserve(job.id, job.lease_token, worker, process_id)
            self.leases.append(job)
            self.claimed_on[job.lease] = self._on(worker)
        self.tally["claimed"] += len(jobs)

    def _count(self, name, expected):
        self.tally[f"{name} {'ok' if expected else 'refused'}"] += 1

    def _completable(self, leases):
        return {lease.job_id for lease in leases
                if self.model.holds_live(lease) or self.model.done_under(lease)}

    # -- producing ------------------------------------------------------------------------

    @initialize(specs=st.lists(JOB_SPECS, min_size=2, max_size=6), limit=LIMIT)
    def start_with_jobs_and_a_claim(self, specs, limit):
        # Every sequence has leases to play with, whichever rules it draws.
        self.enqueue(specs, together=True)
        self.claim(list(QUEUES), WORKERS[0], 1, limit, short=False)

    @rule(specs=st.lists(JOB_SPECS, min_size=1, max_size=3), together=st.booleans())
    def enqueue(self, specs, together):
        """One by one, or in one enqueue_many()."""
        batch = [self._new(spec) for spec in specs]
        if together:
            return self._enqueue_many(batch)
        for new in batch:
            known = self.model.keys.get((new.queue, new.key)) if new.key else None
            job_id = self.store.enqueue(new)
            if known is not None:
                assert job_id == known, f"key {new.key!r} of {new.queue}: {job_id}, not {known}"
                self.tally["enqueue same key"] += 1
            else:
                assert job_id > self.model.max_id, f"new job {job_id} reuses an id"
                self.model.add(job_id, new)

    def _enqueue_many(self, batch):
        fresh, keys = [], set(self.model.keys)
        for new in batch:
            if new.key is None or (new.queue, new.key) not in keys:
                fresh.append(new)
                keys.add((new.queue, new.key))
        assert self.store.enqueue_many(batch) == len(fresh), "enqueue_many's count of new jobs"
        rows, _ = raw(self.store, NEW_ROWS, (self.model.max_id,))
        assert [row[1:3] for row in rows] == [(new.queue, new.key) for new in fresh]
        for (job_id, _, _, available_at), new in zip(rows, fresh):
            self.model.add(job_id, new)
            # Known now, not only after this step: the first claim follows at once.
            self.model.jobs[job_id].available_at = as_time(available_at)

    # -- claims and completions ------------------------------------------------------------

    @rule(queues=QUEUE_LISTS, worker=WORKER, supervisor=SUPERVISOR, limit=LIMIT,
          short=st.booleans())
    def claim(self, queues, worker, supervisor, limit, short):
        """short: the leases run out right after the claim (as if far too short)."""
        expected = self.model.claim_order(queues, limit)
        process_id = self._supervisor(supervisor)
        jobs = self._on(worker).claim(queues, worker, LEASE, limit, process_id)
        assert [job.id for job in jobs] == expected, f"claim {queues} limit {limit}"
        self._took(jobs, worker, process_id)
        for job in jobs if short else ():
            self._expire(job.id)

    @precondition(lambda self: self.leases)
    @rule(picks=PICKS, how=st.sampled_from(("one", "many", "transaction")))
    def complete(self, picks, how):
        """complete() or job.transaction() (live leases only) by the worker that claimed
        the job, or complete_many() by its supervisor."""
        if how == "many":
            leases = [job.lease for job in self._leases(picks)]
            done = self._completable(leases)
            assert self.store.complete_many(leases) == done, f"complete_many {leases}"
        else:
            job = self._lease(picks[0])
            expected = self.model.holds_live(job.lease) or (
                how == "one" and self.model.done_under(job.lease))
            assert self._complete_one(job, how) == expected, f"complete ({how}) job {job.id}"
            self._count(f"complete ({how})", expected)
            done = {job.id} if expected else set()
        for job_id in done:
            self.model.complete(job_id)

    def _complete_one(self, job, how):
        if how == "one":
            return self.claimed_on[job.lease].complete(job)
        try:
            with job.transaction():
                pass
        except LeaseLost:
            return False
        return True

    @precondition(lambda self: self.leases)
    @rule(picks=PICKS, queues=QUEUE_LISTS, worker=WORKER, supervisor=SUPERVISOR, limit=LIMIT)
    def complete_and_claim(self, picks, queues, worker, supervisor, limit):
        leases = [job.lease for job in self._leases(picks)]
        expected = self._completable(leases)
        for job_id in expected:
            self.model.complete(job_id)
        self.flows.settle()   # a workflow's step they release may be claimed at once
        # "Up to limit": a claim may stop at the first queue that had jobs.
        allowed = (self.model.claim_order(queues, limit),
                   self.model.first_queue_order(queues, limit))
        process_id = self._supervisor(supervisor)
        completed, jobs = self._on(worker).complete_and_claim(leases, queues, worker, LEASE,
                                                              process_id, limit)
        assert completed == expected, f"complete_and_claim completed {completed}"
        claimed = [job.id for job in jobs]
        if self.flows.released & set(claimed):   # released now: in the order of their release
            allowed = [sorted(order) for order in allowed]
            claimed.sort()
        assert claimed in allowed, f"complete_and_claim claimed {queues}"
        self._took(jobs, worker, process_id)

    @precondition(lambda self: self.leases)
    @rule(pick=PICK, permanent=st.booleans(), delay=DELAY)
    def fail(self, pick, permanent, delay):
        """A failed attempt, as the worker decides it: retry after `delay`, or dead when
        permanent or out of attempts."""
        job = self._lease(pick)
        decision = RetryPolicy(base=delay, cap=delay).decide(job.attempt, job.max_attempts,
                                                             permanent)
        expected = self.model.holds_live(job.lease)
        failed = self.claimed_on[job.lease].fail(job, "ModelError", decision)
        assert failed == expected, f"fail job {job.id}"
        self._count("fail", expected)
        if expected:
            self.model.settle(job.id, DEAD if decision.dead else READY, due=delay == 0)

    @precondition(lambda self: self.leases)
    @rule(pick=PICK)
    def release(self, pick):
        """A shutdown gives back a claim it never started."""
        job = self._lease(pick)
        expected = self.model.holder(job.lease) is not None   # no live lease needed
        assert self.claimed_on[job.lease].release(job) == expected, f"release job {job.id}"
        self._count("release", expected)
        if expected:
            self.model.settle(job.id, READY, attempts_delta=-1)

    @precondition(lambda self: self.leases)
    @rule(pick=PICK)
    def finish_cancelled(self, pick):
        """A supervisor ends a job it stopped (or a worker that stopped on JobCancelled)."""
        job = self._lease(pick)
        expected = self.model.holder(job.lease) is not None   # the token alone fences it
        assert self.store.finish_cancelled(job.lease) == expected, f"finish_cancelled {job.id}"
        self._count("finish_cancelled", expected)
        if expected:
            self.model.settle(job.id, CANCELLED)

    @precondition(lambda self: self.leases)
    @rule(picks=PICKS)
    def extend(self, picks):
        """extend() one lease (its worker), or extend_many() several (their supervisor)."""
        jobs = self._leases(picks)
        if len(jobs) == 1:
            expected = self.model.holds_live(jobs[0].lease)
            extended = self.claimed_on[jobs[0].lease].extend(jobs[0], LEASE)
            assert extended == expected, f"extend job {jobs[0].id}"
            return self._count("extend", expected)
        leases = [job.lease for job in jobs]
        expected = sum(self.model.holds_live(lease) or self.model.done_under(lease)
                       for lease in leases)
        assert self.store.extend_many(leases, LEASE) == expected, f"extend_many {leases}"

    def _superseded(self):
        """Stale leases whose job another lease holds now."""
        held = {job.id: job.token for job in self.model.jobs.values() if job.status == RESERVED}
        return [job for job in self.leases if held.get(job.id) not in (None, job.lease_token)]

    @precondition(lambda self: self._superseded())
    @rule(index=st.integers(0, 1000))
    def stale_worker_tries_everything(self, index):
        """A worker whose lease was lost (its job claimed again since) tries every
        way of finishing it: none may touch the job."""
        job = self._superseded()[index % len(self._superseded())]
        store = self.claimed_on[job.lease]
        finished = RetryPolicy().decide(job.attempt, job.max_attempts)
        assert not store.complete(job) and not store.complete_many([job.lease])
        assert not store.fail(job, "Stale", finished) and not store.extend(job, LEASE)
        assert store.extend_many([job.lease], LEASE) == 0 and not store.release(job)
        assert not self._complete_one(job, "transaction")
        assert store.hand_back(job.id, job.lease_token, "SIGKILL", RetryPolicy(), 3) is None
        self.tally["stale worker refused"] += 1

    # -- leases that end without their holder ------------------------------------------------

    @precondition(lambda self: self.model.of_status(RESERVED))
    @rule(index=st.integers(0, 1000))
    def lease_expires(self, index):
        """Test-only: a lease's time passes (its lease_until moves into the past)."""
        live = [job.id for job in self.model.jobs.values() if job.status == RESERVED and job.live]
        if live:
            self._expire(live[index % len(live)])

    def _expire(self, job_id):
        assert raw(self.store, EXPIRE_LEASE, (self.model.past(), job_id))[1] == 1
        self.model.jobs[job_id].live = False

    @rule(limit=LIMIT)
    def recover_expired(self, limit):
        """Expired leases back to ready (dead when out of attempts), oldest first."""
        expired = sorted((job for job in self.model.jobs.values()
                          if job.status == RESERVED and not job.live),
                         key=lambda job: job.lease_until)[:limit]
        assert self.store.recover_expired(limit) == len(expired), "recover_expired"
        for job in expired:
            self.model.give_back(job.id)
        self.tally["recovered"] += len(expired)

    @precondition(lambda self: self.leases)
    @rule(pick=PICK, charge=st.booleans(), delay=DELAY, max_crashes=st.integers(1, 3))
    def hand_back(self, pick, charge, delay, max_crashes):
        """A worker died holding the job (charge) or its supervisor stopped it."""
        job = self._lease(pick)
        held = self.model.holder(job.lease)
        policy = RetryPolicy(base=delay, cap=delay)
        status = self.store.hand_back(job.id, job.lease_token, "SIGKILL", policy, max_crashes,
                                      charge)
        if held is None:
            assert status is None, f"hand_back of job {job.id} with a stale token: {status}"
            return self._count("hand_back", False)
        if not charge:
            expected, due, attempts, crashes = READY, True, -1, 0
        elif held.crashes + 1 >= max_crashes or held.attempts >= held.max_attempts:
            expected, due, attempts, crashes = DEAD, True, 0, 1
        else:
            expected, due, attempts, crashes = READY, delay == 0, 0, 1
        expected = CANCELLED if held.cancelling else expected
        assert status == expected, f"hand_back of job {job.id}: {status}, model {expected}"
        self._count("hand_back", True)
        self.model.settle(job.id, expected, due, attempts, crashes)
