"""A check's result (one line of why), the runner that keeps one broken check from
hiding the others, and the two ways the results are printed."""
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum

from .. import failures
from ..errors import UserError
from ..store import driver_errors


class Status(StrEnum):
    OK = "ok"
    WARN = "warn"      # works, but not as it should be for production
    FAIL = "fail"      # the queue will not work (or not safely) until this is fixed
    SKIP = "skip"      # not checked: a check it depends on failed


# The two checks of the plans, on every backend: the claim's statements and the
# completion's.
CLAIM_PLAN, COMPLETION_PLAN = PLAN_CHECKS = ("claim plan", "completion plan")


@dataclass(frozen=True)
class Check:
    name: str
    status: Status
    detail: str

    def as_dict(self) -> dict[str, str]:
        return {"check": self.name, "status": self.status.value, "detail": self.detail}


def reported_errors() -> tuple[type[Exception], ...]:
    """What a check may raise and still be reported as one line: our refusals and
    the database drivers' errors (anything else is a bug, with its traceback)."""
    return (UserError, *driver_errors())


def run_check(name: str, check: Callable[[], Check]) -> Check:
    """check(), or a failed Check saying what went wrong (never a traceback)."""
    try:
        return check()
    except reported_errors() as exc:
        return failure(name, exc)


def run_checks(names: Sequence[str], checks: Callable[[], list[Check]]) -> list[Check]:
    """checks(), one Check per name; or each name failed, as run_check says."""
    try:
        return checks()
    except reported_errors() as exc:
        return [failure(name, exc) for name in names]


def failure(name: str, exc: Exception) -> Check:
    """A refusal of ours in its own words; a driver's error by class, code and the
    server's own words."""
    return Check(name, Status.FAIL, str(exc) if isinstance(exc, UserError) else database_error(exc))


def database_error(exc: BaseException) -> str:
    """"database error OperationalError 1142: UPDATE command denied ..." in one line."""
    return "database error " + " ".join(failures.database_error(exc).splitlines())


def skipped(name: str, because: str) -> Check:
    return Check(name, Status.SKIP, f"not checked: {because}")


def failed(checks: Sequence[Check]) -> bool:
    return any(check.status is Status.FAIL for check in checks)


def render_text(checks: Sequence[Check]) -> str:
    width = max((len(check.name) for check in checks), default=0)
    lines = [f"{check.status.value:<4}  {check.name:<{width}}  {check.detail}" for check in checks]
    verdict = "some checks failed" if failed(checks) else "no check failed"
    return "\n".join(lines + [verdict])


def render_json(checks: Sequence[Check]) -> str:
    return json.dumps([check.as_dict() for check in checks], indent=2)
