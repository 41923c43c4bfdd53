"""`enqueue --file`: a JSON-lines file of jobs, validated whole, then inserted in
batches that commit one by one. When the database goes away mid-file, the error
line says how many jobs were committed and the line to resume from (--from-line)."""
from types import TracebackType
from typing import NamedTuple, Optional

from ..config import Config
from ..errors import DatabaseUnavailable, UserError
from ..failures import ErrorWriter, database_error
from ..job_fields import check_job_types, job_from_fields
from ..jobs import NewJob, parse_json
from ..progress import Progress
from ..store import driver_errors
from .handled import Enqueued, check_handled, warn
from .helpers import checked_store
from .wording import counted, line_range

BULK_CHUNK = 1000   # lines per transaction


class FileJob(NamedTuple):
    line: int   # the line of the file (from 1) the job was read from
    job: NewJob


def enqueue_file(path: str, config: Config, from_line: int, force: bool = False) -> None:
    """Enqueue the jobs of `path` from line `from_line` on; prints the counts. Unless
    forced, refuse the file if a job's type is not handled (handled.py)."""
    lines = read_jobs_file(path, config, from_line)
    if not force:
        check_job_types({entry.job.type for entry in lines}, config)
    store = checked_store(config)
    warnings = [] if force or config.app else check_handled(_first_of_each_type(path, lines),
                                                            config, store)
    progress = Progress(len(lines), "enqueue")
    new = committed = 0
    try:
        while committed < len(lines):
            chunk = lines[committed:committed + BULK_CHUNK]
            new += store.enqueue_many([entry.job for entry in chunk])
            committed += len(chunk)
            progress.advance(len(chunk))
    except driver_errors() as exc:
        raise DatabaseUnavailable(_cut_off(exc, path, from_line, lines, committed)) from None
    finally:
        progress.finish()
    print(f"enqueued {counted(new, 'new job')} ({len(lines) - new} already present)")
    warn(warnings)


def _first_of_each_type(path: str, lines: list[FileJob]) -> list[Enqueued]:
    """Each queue and job type of the file once, where it first appears."""
    seen: dict[tuple[str, str], Enqueued] = {}
    for entry in lines:
        job = entry.job
        seen.setdefault((job.queue, job.type), Enqueued(job.queue, job.type,
                                                        f"{path}:{entry.line}: "))
    return list(seen.values())


def _cut_off(exc: BaseException, path: str, from_line: int, lines: list[FileJob],
             committed: int) -> str:
    """The one line for a file cut off by the database after `committed` jobs: the
    error, what was committed, and the line to resume from."""
    chunk = lines[committed:committed + BULK_CHUNK]
    first, last = chunk[0].line, chunk[-1].line
    cause = " ".join(ErrorWriter().mask(database_error(_cause(exc))).splitlines())
    said = f"database error {cause}: {counted(committed, 'job')} of {path} committed"
    if committed:
        said += f" ({line_range(from_line, first - 1)})"
    if not _lost_during_commit(exc):
        return f"{said}, none after: resume with --from-line {first}"
    rest = committed + len(chunk)
    they_are = "it is" if len(chunk) == 1 else "they are"
    then = f"--from-line {lines[rest].line} if {they_are}" if rest < len(lines) \
        else f"nothing is left if {they_are}"
    return (f"{said}; {line_range(first, last)} ({counted(len(chunk), 'job')}) "
            f"{'was' if len(chunk) == 1 else 'were'} being committed when the connection was "
            f"lost and may be in the table: resume with --from-line {first} if "
            f"{they_are} not, {then}")


def _cause(exc: BaseException) -> BaseException:
    """The error that stopped the batch. An INSERT cut off by a lost connection is
    followed by a ROLLBACK on the closed connection, whose error (PyMySQL's
    InterfaceError 0, no message) says nothing: report the INSERT's."""
    context = exc.__context__
    return context if isinstance(context, driver_errors()) else exc


def _lost_during_commit(exc: BaseException) -> bool:
    """Whether the batch failed in its COMMIT: the server may have committed it even
    though we heard no answer. An error anywhere else rolls the batch back."""
    trace: Optional[TracebackType] = exc.__traceback__
    while trace is not None:
        if trace.tb_frame.f_code.co_name == "commit":   # the DB-API call
            return True
        trace = trace.tb_next
    return False


def read_jobs_file(path: str, config: Config, from_line: int = 1) -> list[FileJob]:
    """Validate every line (from `from_line` on) before anything is written: a bad
    line changes nothing.

    The validated jobs are held in memory (about the size of the file), so that the
    file is read once and what is inserted is exactly what was checked."""
    jobs, number = [], 0
    try:
        with open(path, "rb") as handle:
            for number, raw in enumerate(handle, 1):
                if number >= from_line and raw.strip():
                    jobs.append(FileJob(number, _job_from_line(raw, f"{path}:{number}", config)))
    except OSError as exc:
        raise UserError(f"cannot read {path!r}: {exc.strerror}") from None
    if from_line > max(number, 1):
        raise UserError(f"--from-line {from_line}: {path} has {counted(number, 'line')}")
    return jobs


def _job_from_line(raw: bytes, where: str, config: Config) -> NewJob:
    try:
        return job_from_fields(parse_json(raw, "line"), config)
    except UserError as exc:
        raise UserError(f"{where}: {exc}") from None
