"""The limits in force in this process: those the application's handlers declare
(`@prefork.handler(..., concurrency=2, rate="100/m")`) and those of the
[command:TYPE] sections installed from the config file, for the job types this
process handles.

The supervisor publishes them (Store.publish_limits) at start and after a
reload; each child reads them once, at its start: its limited claims take jobs
of these types, under the rules the database holds (the last published).
"""
from .. import registry
from ..worker import commands
from .rules import LimitRule


def handled_types() -> list[str]:
    """The job types with a handler here: the application's and the installed
    command sections' (a section dropped at a reload is no longer one)."""
    return sorted(commands.handled_types(commands.installed()))


def declared_rules() -> dict[str, LimitRule]:
    """{job type: rule} of the handled types that declare a limit."""
    rules = {}
    for job_type in handled_types():
        rule = registry.limit_rule(job_type)
        if rule is not None:
            rules[job_type] = rule
    return rules
