"""The names of the scale scenarios (`bench --scale NAME,...`), in the order they run:
the CLI validates a selection against them without importing the bench itself."""

SCENARIO_NAMES = ("many_queues", "many_workers", "many_supervisors", "slow_jobs",
                  "slow_jobs_1s", "fork_per_job", "delayed", "effects", "bulk_enqueue",
                  "enqueue_one")
