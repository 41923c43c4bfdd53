"""Wake-ups that end a wait early: the same-host doorbell an enqueue rings (doorbell),
the UDP port a supervisor may listen on for rings from other hosts (udp) and the
producers' cached read of who listens (remote), what the supervisor's loop listens
on (listening), and the self-pipe a signal handler writes to (waker)."""
