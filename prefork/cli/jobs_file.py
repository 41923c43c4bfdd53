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
from .helpers import checked_store

BULK_CHUNK = 1000   # lines per transaction


class FileJob(NamedTuple):
    line: int   # the line of the file (from 1) the job was read from
    job: NewJob


def enqueue_file(path: str, config: Config, from_line: int) -> None:
    """Enqueue the jobs of `path` from line `from_line` on; prints the counts."""
    lines = read_jobs_file(path, config, from_line)
    check_job_types({entry.job.type for entry in lines}, config)
    store = checked_store(config)
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
    print(f"enqueued {new} new jobs ({len(lines) - new} already present)")


def _cut_off(exc: BaseException, path: str, from_line: int, lines: list[FileJob],
             committed: int) -> str:
    """The one line for a file cut off by the database after `committed` jobs: the
    error, what was committed, and the line to resume from."""
    chunk = lines[committed:committed + BULK_CHUNK]
    first, last = chunk[0].line, chunk[-1].line
    cause = " ".join(ErrorWriter().mask(database_error(_cause(exc))).splitlines())
    said = f"database error {cause}: {committed} jobs of {path} committed"
    if committed:
        said += f" (lines {from_line}-{first - 1})"
    if not _lost_during_commit(exc):
        return f"{said}, none after: resume with --from-line {first}"
    rest = committed + len(chunk)
    then = f"--from-line {lines[rest].line} if they are" if rest < len(lines) \
        else "nothing is left if they are"
    return (f"{said}; lines {first}-{last} ({len(chunk)} jobs) were being committed when the "
            f"connection was lost and may be in the table: resume with --from-line {first} "
            f"if they are not, {then}")


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
        raise UserError(f"--from-line {from_line}: {path} has {number} lines")
    return jobs


def _job_from_line(raw: bytes, where: str, config: Config) -> NewJob:
    try:
        return job_from_fields(parse_json(raw, "line"), config)
    except UserError as exc:
        raise UserError(f"{where}: {exc}") from None
