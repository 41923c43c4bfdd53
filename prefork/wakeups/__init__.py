"""Wake-ups that end a wait early: the same-host doorbell an enqueue rings (doorbell),
and the self-pipe a signal handler writes to (waker)."""
