"""The documentation site, built as CI builds it: `python3 -m sphinx -W --keep-going -n`
(a broken cross-reference, a page missing from a toctree, an API object without a
docstring fail the build), then every internal link and anchor of the built pages
checked, and every command, flag, setting, event and public API name found in its
reference page."""
import argparse
import re
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

import prefork
from prefork.cli.dispatch import every_command
from prefork.cli.parser import build_parser
from prefork.events import Event
from prefork.settings import SETTINGS

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
BUILD_TIMEOUT = 300          # seconds; a build takes well under a minute, on a loaded machine more


def sphinx_build(source, out):
    return subprocess.run([sys.executable, "-m", "sphinx", "-W", "--keep-going", "-n", "-q",
                           str(source), str(out)], capture_output=True, text=True,
                          timeout=BUILD_TIMEOUT, cwd=ROOT)


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    out = tmp_path_factory.mktemp("docs") / "html"
    result = sphinx_build(DOCS, out)
    assert result.returncode == 0, f"the docs build failed:\n{result.stderr}"
    return out


class Anchors(HTMLParser):
    """The ids a page defines and the links it makes."""

    def __init__(self):
        super().__init__()
        self.ids, self.links = set(), []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if attrs.get("id"):
            self.ids.add(attrs["id"])
        if tag == "a" and attrs.get("href"):
            self.links.append(attrs["href"])


def read(page):
    parser = Anchors()
    parser.feed(page.read_text())
    return parser


def broken_links(site):
    """Every internal link of the built pages whose page or anchor does not exist:
    (page, link, why)."""
    pages = {page: read(page) for page in site.rglob("*.html")}
    broken = []
    for page, parsed in pages.items():
        for link in parsed.links:
            parts = urlsplit(link)
            if parts.scheme or parts.netloc or link.startswith("mailto:"):
                continue
            target = (page.parent / unquote(parts.path)).resolve() if parts.path else page
            if target.is_dir():
                target = target / "index.html"
            if not target.exists():
                broken.append((page.relative_to(site), link, "no such page"))
            elif parts.fragment and target.suffix == ".html" and \
                    unquote(parts.fragment) not in pages.get(target, read(target)).ids:
                broken.append((page.relative_to(site), link, "no such anchor"))
    return broken


def text_of(site, page):
    return re.sub(r"<[^>]+>", " ", (site / page).read_text())


def test_every_internal_link_and_anchor_resolves(site):
    broken = broken_links(site)
    assert not broken, "broken links:\n" + "\n".join(f"{page}: {link} ({why})"
                                                    for page, link, why in broken)


def test_the_link_check_finds_a_missing_page_and_a_missing_anchor(tmp_path):
    (tmp_path / "a.html").write_text('<h1 id="top">A</h1><a href="b.html#nowhere">b</a>'
                                     '<a href="#top">top</a><a href="gone.html">gone</a>'
                                     '<a href="https://example.com/x#y">out</a>')
    (tmp_path / "b.html").write_text('<h1 id="here">B</h1><a href="a.html#top">a</a>')
    assert sorted((str(page), link, why) for page, link, why in broken_links(tmp_path)) == [
        ("a.html", "b.html#nowhere", "no such anchor"), ("a.html", "gone.html", "no such page")]


def test_every_source_page_is_built(site):
    sources = [path for path in DOCS.rglob("*.md") if "_build" not in path.parts]
    missing = [str(path.relative_to(DOCS)) for path in sources
               if not (site / path.relative_to(DOCS)).with_suffix(".html").exists()]
    assert not missing, f"pages not built: {missing}"


def test_every_command_and_flag_has_its_entry(site):
    text = text_of(site, "reference/cli.html")
    registered = every_command()
    parser = build_parser()
    commands = next(action for action in parser._actions if hasattr(action, "choices")
                    and isinstance(action.choices, dict)).choices
    assert set(commands) == set(registered)
    for name, command in commands.items():
        assert re.search(rf"\b{re.escape(name)}\b", text), f"no entry for the {name} command"
        for action in command._actions:
            if isinstance(action, argparse._HelpAction):
                continue        # -h/--help: every command has it, the reference says nothing of it
            for flag in action.option_strings:
                assert flag in text, f"{name} {flag} is not in the command reference"
    for setting in SETTINGS:
        if setting.flag:
            assert setting.flag_name in text


def test_every_setting_event_and_api_name_has_its_entry(site):
    settings = text_of(site, "reference/settings.html")
    assert all(setting.env_name in settings for setting in SETTINGS)
    events = text_of(site, "reference/events.html")
    assert all(event.value in events for event in Event)
    api = read(site / "reference/api.html").ids
    assert all(f"prefork.{name}" in api for name in prefork.__all__), \
        sorted(f"prefork.{name}" for name in prefork.__all__ if f"prefork.{name}" not in api)
    for name in ("prefork.testing.inline", "prefork.testing.InlineQueue.drain",
                 "prefork.contrib.django.TaskBackend", "prefork.dashboard.create_app"):
        assert name in api, name


def small_site(tmp_path, pages, module=None):
    """A copy of the docs' configuration with the given pages (and a module to document)."""
    source = tmp_path / "docs"
    source.mkdir()
    shutil.copy(DOCS / "conf.py", source / "conf.py")
    shutil.copytree(DOCS / "_ext", source / "_ext")
    for name, text in pages.items():
        (source / name).write_text(text)
    if module:
        (source / "_ext" / "undocumented_example.py").write_text(module)
    return source


INDEX = "# Home\n\n```{toctree}\nother\n```\n"


@pytest.mark.parametrize("pages,module,warning", [
    ({"index.md": INDEX, "other.md": "# Other\n\nSee [the part](index.md#no-such-heading).\n"},
     None, "no-such-heading"),
    ({"index.md": INDEX, "other.md": "# Other\n", "orphan.md": "# Orphan\n"},
     None, "document isn't included in any toctree"),
    ({"index.md": INDEX, "other.md": "# Other\n\n{py:func}`prefork.no_such_function`\n"},
     None, "prefork.no_such_function"),
    ({"index.md": INDEX,
      "other.md": "# Other\n\n```{eval-rst}\n.. autofunction:: undocumented_example.helper\n```\n"},
     '"""A module."""\n\n\ndef helper():\n    return 1\n', "has no docstring"),
], ids=["broken anchor", "page not in a toctree", "broken cross-reference", "no docstring"])
def test_the_build_fails_on(tmp_path, pages, module, warning):
    result = sphinx_build(small_site(tmp_path, pages, module), tmp_path / "html")
    assert result.returncode != 0 and warning in result.stderr, result.stderr
