"""How every time we show reads: ISO 8601 in UTC, to the millisecond, with its zone
(2026-12-04T03:28:24.018+00:00), in `show`, `status`, the error history, the
dashboard and its API alike."""
from datetime import datetime, timezone


def utc_iso(moment: datetime) -> str:
    """A stored time (naive UTC) or an aware one, as we show it."""
    aware = moment.replace(tzinfo=timezone.utc) if moment.tzinfo is None \
        else moment.astimezone(timezone.utc)
    return aware.isoformat(timespec="milliseconds")
