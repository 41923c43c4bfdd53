"""Sphinx configuration: MyST (Markdown) pages, the furo theme, the Python API from
docstrings, the command line from the real parser, and the settings, events and exit
codes generated from the code (_ext/prefork_reference.py)."""
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE / "_ext")]

project = "prefork-queue"
author = "the prefork-queue authors"
copyright = "2026, the prefork-queue authors"

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinxarg.ext",
    "prefork_reference",
]
source_suffix = {".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "_ext"]
html_theme = "furo"
html_title = "prefork-queue"
html_static_path: list[str] = []

# Links to a heading of another page: [text](page.md#heading-slug), as GitHub slugs them.
myst_heading_anchors = 4
myst_enable_extensions = ["colon_fence", "deflist"]

autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_default_options = {"members": True, "show-inheritance": False}

# Names in signatures that no page documents (the standard library and the drivers):
# without intersphinx (the build is offline) they cannot resolve, so only they are let go.
nitpick_ignore_regex = [
    ("py:class", r"(typing|collections\.abc|types|datetime|pathlib|sqlite3|pymysql|contextlib|"
                 r"argparse|enum|logging)\..*"),
    ("py:class", r"(Any|Optional|Callable|Iterator|Sequence|Mapping|Iterable|NoReturn|Self)"),
    # Internal types that public signatures name: the store a job completes through, the
    # dashboard's WSGI class, a handler's return type and a hook's type variables, and
    # Django's base class.
    ("py:class", r"prefork\.(jobs\.CompletionStore|store\.contract\.Store|dashboard\.app\.Dashboard)"),
    ("py:(class|obj)", r"prefork\.registry\.(Result|AnyHook)"),
    ("py:class", r"django_tasks\..*|django\.tasks\..*"),
]
