"""Reference pages generated from the code, so that they cannot drift from it:

- ``{prefork-settings}``: the settings table, `prefork-queue config --markdown`'s
  (prefork.settings.settings_table);
- ``{prefork-events}``: the event catalogue of prefork/events.py;
- ``{prefork-exit-codes}``: prefork/cli/exit_codes.py, each code with the comment
  above it;
- ``{prefork-job-states}``: prefork.jobs.JobStatus, each state with its comment;
- ``{prefork-migrations}``: each schema version of prefork/schema/mysql, with the
  comment that opens its file;
- ``{prefork-metrics}``: the metrics prefork/observers/metrics.py declares;

and a check that every object autodoc documents has a docstring (a warning, so
`sphinx -W` fails on one without)."""
import ast
import inspect
import logging as std_logging
from pathlib import Path
from typing import Any, Callable

from docutils import nodes
from docutils.statemachine import StringList
from sphinx.application import Sphinx
from sphinx.util import logging
from sphinx.util.docutils import SphinxDirective

from prefork.cli.exit_codes import ExitCode
from prefork.events import Event
from prefork.jobs import JobStatus
from prefork.settings import settings_table

LOGGER = logging.getLogger(__name__)
NEEDS_A_DOCSTRING = {"module", "class", "exception", "function", "method", "property",
                     "classmethod", "staticmethod"}


def events_table() -> str:
    """The catalogue as a Markdown table: name, level, meaning."""
    return markdown_table(["event", "level", "meaning"], [
        [f"`{event.value}`", std_logging.getLevelName(event.level).lower(), event.meaning]
        for event in Event])


def exit_codes_table() -> str:
    """Each exit code, its name and the comment written above it in exit_codes.py."""
    comments = member_comments(inspect.getsource(ExitCode))
    return markdown_table(["exit", "name", "meaning"], [
        [str(int(code)), f"`{code.name}`", comments.get(code.name) or "success"]
        for code in ExitCode])


def job_states_table() -> str:
    """Each job state, with the comment beside it in prefork/jobs.py."""
    comments = member_comments(inspect.getsource(JobStatus))
    return markdown_table(["state", "meaning"], [[f"`{state.value}`", comments.get(state.name, "")]
                                                 for state in JobStatus])


def migrations_table() -> str:
    """Each MySQL schema version, with the comment that opens its file."""
    folder = Path(inspect.getfile(JobStatus)).parent / "schema" / "mysql"
    return markdown_table(["version", "what it brings"], [
        [f"`{path.stem}`", opening_comment(path.read_text())]
        for path in sorted(folder.glob("[0-9]*.sql"))])


def metrics_table() -> str:
    """Each metric as the supervisor declares it: name (as scraped), type, labels, help.
    Declared on a registry of its own, with no server started."""
    from prometheus_client import CollectorRegistry

    from prefork.observers.metrics import Metrics
    metrics = Metrics.__new__(Metrics)
    metrics.registry = CollectorRegistry()
    metrics._declare()
    labels = {value._name: value._labelnames for value in vars(metrics).values()
              if hasattr(value, "_labelnames")}
    return markdown_table(["metric", "type", "labels", "help"], [
        [f"`{family.name}_total`" if family.type == "counter" else f"`{family.name}`",
         family.type, ", ".join(labels.get(family.name, ())), family.documentation]
        for family in metrics.registry.collect()])


def markdown_table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def opening_comment(sql: str) -> str:
    """The `--` lines a SQL file starts with, up to its first blank comment line."""
    words = []
    for line in sql.splitlines():
        text = line.strip()
        if not text.startswith("--") or text == "--":
            break
        words.append(text[2:].strip())
    return " ".join(words)


def member_comments(source: str) -> dict[str, str]:
    """{member name: the `#` comment beside its assignment, or the comment lines just
    above it, joined}."""
    lines = source.splitlines()
    found = {}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            beside = lines[node.lineno - 1].partition("#")[2].strip()
            above, number = [], node.lineno - 2
            while number >= 0 and lines[number].strip().startswith("#"):
                above.insert(0, lines[number].strip().lstrip("#").strip())
                number -= 1
            found[node.targets[0].id] = beside or " ".join(above)
    return found


class GeneratedTable(SphinxDirective):
    """A Markdown table made by `make()`, parsed as the page's own Markdown."""

    make: Callable[[], str]

    def run(self) -> list[nodes.Node]:
        container = nodes.container(classes=["prefork-generated"])
        self.state.nested_parse(StringList(self.make().splitlines(), source="(generated)"),
                                self.content_offset, container)
        return [container]


# Each directive and the function that makes its table.
TABLES: dict[str, Callable[[], str]] = {
    "prefork-settings": settings_table,
    "prefork-events": events_table,
    "prefork-exit-codes": exit_codes_table,
    "prefork-job-states": job_states_table,
    "prefork-migrations": migrations_table,
    "prefork-metrics": metrics_table,
}


def table_directive(make: Callable[[], str]) -> type[GeneratedTable]:
    return type(f"Table_{make.__name__}", (GeneratedTable,), {"make": staticmethod(make)})


def require_docstring(app: Sphinx, what: str, name: str, obj: Any, options: Any,
                      lines: list[str]) -> None:
    if what in NEEDS_A_DOCSTRING and not any(line.strip() for line in lines):
        LOGGER.warning("%s %s has no docstring", what, name, type="prefork", subtype="docstring")


def setup(app: Sphinx) -> dict[str, Any]:
    for name, make in TABLES.items():
        app.add_directive(name, table_directive(make))
    app.connect("autodoc-process-docstring", require_docstring)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
