"""Documentation facts that must not drift from the code: the example config file, the
generated reference tables (settings, events, exit codes), the README as a front page,
and no development history in the pages. The built site is tested in
tests/project/test_docs_site.py."""
import re
import sys
from pathlib import Path

import pytest
from conftest import run_cli

from prefork.cli.exit_codes import ExitCode
from prefork.events import Event
from prefork.jobs import JobStatus
from prefork.settings import SETTINGS

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
README = ROOT / "README.md"
sys.path.insert(0, str(DOCS / "_ext"))
import prefork_reference  # noqa: E402  (docs/_ext: the pages' generated tables)

CI_RUN = ROOT / ".ci" / "run"
# The Debian packages .ci/run installs, which the README's apt-get line must name.
APT_PACKAGES = re.search(r"^APT_PACKAGES=\(([^)]*)\)", CI_RUN.read_text(), re.M).group(1).split()
# The set-up commands that .ci/run and the tests run, as the README gives them.
SET_UP_LINES = ["python3 -m pip install -e '.[test]'",
                "apt-get install -y " + " ".join(APT_PACKAGES),
                "python3 -m pytest -n 2 --dist loadfile"]
# Development history has no place in the pages: an issue number, a "second pass",
# a commit named as the date of a figure.
HISTORY = [re.compile(r"\bissues?\s+#?\d+", re.I),
           re.compile(r"\b(first|second|third|fourth|fifth|sixth|next|later|earlier|previous|"
                      r"last|this|that|another|one|a|each|per|loop)\s+pass(es)?\b", re.I),
           re.compile(r"\bpass(es)? at\b", re.I),
           re.compile(r"\b(at|in|since|before|after)\s+(commit\s+)?`?[0-9a-f]{7,40}`?\b"),
           re.compile(r"\bcommits?\s+`?[0-9a-f]{7,40}\b")]


def pages():
    return sorted(path for path in DOCS.rglob("*.md") if "_build" not in path.parts)


def page_uses(page, directive):
    return f"```{{{directive}}}" in (DOCS / page).read_text()


def test_example_config_file_is_generated_from_the_registry():
    result = run_cli("config", "--example")
    assert result.returncode == 0, result.stderr
    assert (ROOT / "conf" / "prefork-queue.conf").read_text() == result.stdout, \
        "conf/prefork-queue.conf is stale: run `prefork-queue config --example > conf/prefork-queue.conf`"
    for setting in SETTINGS:
        if not setting.secret:
            assert f"# {setting.name} = " in result.stdout


def test_the_settings_page_shows_the_table_config_markdown_prints():
    result = run_cli("config", "--markdown")
    assert result.returncode == 0, result.stderr
    assert page_uses("reference/settings.md", "prefork-settings"), \
        "docs/reference/settings.md must generate its table ({prefork-settings})"
    assert prefork_reference.TABLES["prefork-settings"]() == result.stdout
    for setting in SETTINGS:
        assert f"`{setting.env_name}` / `{setting.name}`" in result.stdout


def test_the_event_catalogue_page_lists_every_event():
    assert page_uses("reference/events.md", "prefork-events")
    table = prefork_reference.events_table()
    for event in Event:
        assert f"| `{event.value}` | " in table and event.meaning.split(":")[0] in table


def test_the_exit_codes_page_names_every_code_with_its_comment():
    assert page_uses("reference/exit-codes.md", "prefork-exit-codes")
    table = prefork_reference.exit_codes_table()
    for code in ExitCode:
        assert re.search(rf"^\| {int(code)} \| `{code.name}` \| \S", table, re.M), code
    assert "Retrying the same command cannot help." in table   # USAGE's comment


def test_the_metrics_page_lists_every_metric_and_explains_each():
    assert page_uses("reference/metrics.md", "prefork-metrics")
    names = re.findall(r"^\| `(prefork_\w+)` \|", prefork_reference.metrics_table(), re.M)
    assert "prefork_jobs_total" in names and "prefork_limit_groups" in names
    explained = (DOCS / "reference" / "metrics.md").read_text()
    missing = [name for name in names if f"`{name}`" not in explained]
    assert not missing, f"docs/reference/metrics.md does not explain {missing}"


def test_the_tables_page_lists_every_job_state_and_schema_version():
    assert page_uses("reference/tables.md", "prefork-job-states")
    assert page_uses("reference/tables.md", "prefork-migrations")
    states = prefork_reference.job_states_table()
    assert all(f"| `{state.value}` |" in states for state in JobStatus)
    versions = prefork_reference.migrations_table()
    for path in (ROOT / "prefork" / "schema" / "mysql").glob("[0-9]*.sql"):
        assert re.search(rf"^\| `{path.stem}` \| \S", versions, re.M), path.name


def test_the_readme_is_a_front_page():
    text = README.read_text()
    assert len(text.splitlines()) <= 200
    lines = [line.strip() for line in text.splitlines()]
    for command in SET_UP_LINES:
        assert command in lines, f"README lost its set-up command {command!r}"
    for target in re.findall(r"\]\((docs/[^)#]+)", text):
        assert (ROOT / target).is_file(), f"README links to a missing page: {target}"


@pytest.mark.parametrize("text,found", [
    ("Against issue 17's targets", True),
    ("A second pass at the claim", True),
    ("measured at commit 7184eee", True),
    ("at e337243 (2026-11-30)", True),
    ("pass it as `after` for the next page", False),
    ("`systemd-analyze verify` passes", False),
])
def test_the_history_check_tells_history_from_prose(text, found):
    assert any(pattern.search(text) for pattern in HISTORY) == found


def test_no_page_holds_development_history():
    found = [f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
             for path in [README, *pages()]
             for number, line in enumerate(path.read_text().splitlines(), 1)
             if any(pattern.search(line) for pattern in HISTORY)]
    assert not found, "development history in the docs:\n" + "\n".join(found)
