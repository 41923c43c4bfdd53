"""When a worker makes its limited claims (prefork.limits), and when it does not.

Jobs of a limited type wait outside the plain claim (limited = 1):
Store.claim_limited takes those whose group (type, concurrency key) has room.
While jobs wait on a full limit, a claim finds nothing, so it must not be
repeated in a loop. A worker with rules makes one only:

- first, before the plain claim: once a limited job of its own ran (its slot
  is free when it ends; after a job with a rate alone, unless its group's next
  token is known to come later), once the parent poked it while it ran a job
  (the parent found limited work and no waiting child), or once the back-off
  of a rate-starved claim ran out: retry_after, the time until the group's
  next token (at least SHORTEST_TOKEN_WAIT, so that a fast rate's tokens are
  claimed a batch at a time), doubled after each rate-starved claim in a row
  that got nothing (another worker took the token), up to the poll interval;
- after a plain claim that found nothing: once woken by the parent (which looks
  for limited work once per poll and wakes one child for it), or at every poll
  of a worker nobody supervises (`prefork-queue work`, drain()).

A worker that ran MAX_LIMITED_STREAK limited jobs in a row looks for a plain
job first (its limited claim follows that job), so that neither kind starves
the other. A worker without rules never makes a limited claim.
"""
import time
from collections.abc import Callable, Mapping
from typing import Any, Optional

from ..jobs import Job
from ..limits.declared import declared_rules
from ..limits.rules import LimitRule

MAX_LIMITED_STREAK = 4
# The shortest wait for a rate's next token: the bucket fills meanwhile, so one claim
# starts the tokens of this span together (a fast rate costs a claim per ~50 ms, not
# one per start), and starts stay within the rate.
SHORTEST_TOKEN_WAIT = 0.05
PlainClaim = Callable[[], Optional[Job]]


class LimitedClaims:
    def __init__(self, worker: Any, rules: Optional[Mapping[str, LimitRule]] = None,
                 active: Optional[bool] = None) -> None:
        """worker: the Worker (prefork.worker.loop) whose claims these are. rules: the
        limits declared here (None: those of this process's handlers), which say
        when to claim; a claim takes jobs of their types under the rules the
        database holds (Store.claim_limited). active: make limited claims (None:
        when there are rules)."""
        self.worker = worker
        self.rules = dict(declared_rules() if rules is None else rules)
        self.active = bool(self.rules) if active is None else active
        self.polling = not worker.supervised   # nobody wakes us: every poll looks
        self.first = self.active       # a limited claim before the next plain one
        self.after_plain = False       # a limited claim should the plain one find nothing
        self.retry_at: Optional[float] = None   # monotonic: a rate-starved group's next token
        self.streak = 0                # limited jobs run in a row
        self.starved = 0               # rate-starved claims in a row that got nothing

    def started(self, job: Job) -> None:
        """A job starts: once it ends, a limited one has freed its group's slot, or
        (a rate alone) more of its kind may start, unless the rate's next token is
        known to come later (the back-off asks then)."""
        if not self.active:
            return
        rule = self.rules.get(job.type)
        if rule is not None:
            self.first = self.first or rule.concurrency is not None or self.retry_at is None
            self.streak += 1
        else:
            self.streak = 0

    def woke(self, woken: bool) -> None:
        """The idle sleep ended: a wake-up may be for limited work."""
        if self.active and woken:
            self.after_plain = True

    def first_due(self) -> bool:
        """Must the next claim be a limited one, before the plain one? (The worker
        then does not chain a plain claim to its completion.)"""
        if not self.active:
            return False
        self._refresh()
        if self.worker.supervised and not self.worker.stopping and self.worker.waker.sleep(0):
            self.first = True   # the parent poked us while we ran a job
        return self.first and self.streak < MAX_LIMITED_STREAK

    def pending(self) -> bool:
        """Is a limited claim due at the next look, even with no plain one to make?"""
        if not self.active:
            return False
        self._refresh()
        return self.first or self.after_plain or self.polling

    def sleep_time(self, seconds: float) -> float:
        """An idle sleep, cut short when a rate-starved group gets its next token."""
        if self.retry_at is None:
            return seconds
        return max(0.0, min(seconds, self.retry_at - time.monotonic()))

    def claim_with(self, plain: Optional[PlainClaim]) -> Optional[Job]:
        """The next job: from the limited claim when it comes first, else from
        plain() (None: no plain claim now), else from a limited claim when due."""
        tried = self.first_due()
        if tried:
            job = self._claim()
            if job is not None:
                return job
        if plain is not None:
            job = plain()
            if job is not None:
                self.after_plain = False   # the wake-up was for this one
                return job
            self.streak = 0   # no plain job waits: limited ones may run in a row
        if not tried and self.pending():
            return self._claim()
        return None

    def _refresh(self) -> None:
        if self.retry_at is not None and time.monotonic() >= self.retry_at:
            self.retry_at = None
            self.first = True

    def _claim(self) -> Optional[Job]:
        self.first = self.after_plain = False
        worker = self.worker
        jobs, retry_after = worker.store.claim_limited(
            worker.config.queues, worker.identity, worker.config.lease_seconds,
            worker.batch_size(), worker.process_id, list(self.rules))
        self.retry_at = None if retry_after is None else \
            time.monotonic() + self._back_off(retry_after, bool(jobs))
        job: Optional[Job] = worker.take(jobs)
        return job

    def _back_off(self, retry_after: float, claimed: bool) -> float:
        """Seconds to wait for a rate-starved group's next token: each worker that
        keeps losing the token to another waits longer (up to the poll interval), so
        that the workers of a host do not all ask for every token."""
        self.starved = 0 if claimed else self.starved + 1
        wait = max(retry_after, SHORTEST_TOKEN_WAIT)
        longest = max(wait, self.worker.config.poll_interval)
        return min(longest, wait * 2.0 ** max(0, self.starved - 1))
