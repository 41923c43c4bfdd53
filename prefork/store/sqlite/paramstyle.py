"""One placeholder style for handlers on both backends: `%s`, as PyMySQL writes it.

The cursor that `job.transaction()` hands out on SQLite is a sqlite3 cursor that
also accepts PyMySQL's `format` paramstyle, so a handler written against the
quick start's SQLite file runs unchanged on MySQL:

    cursor.execute("INSERT INTO invoices (account, total) VALUES (%s, %s)", (7, 120))

The rule, per statement, is PyMySQL's reading of it, so that one statement writes
the same rows on both backends: a statement with `%s` outside string literals,
quoted identifiers and comments, or with `%%` anywhere but in a comment, is in the
`%s` style and is translated (`%s` -> `?`; `%%` -> `%`, inside literals too, as
PyMySQL formats the whole text: `'100%%'` is the text 100%). Any other statement
is passed to sqlite3 unchanged, so `?`, `?NNN`, `:name` and the `%` operator keep
working. A statement in the `%s` style with a `?` outside literals is refused:
which of the two was meant as a placeholder cannot be told, and PyMySQL would
read it differently from sqlite3. A `%s` inside a literal stays as it is. As in
PyMySQL, a statement executed without parameters is not translated at all.
Quoting follows SQLite's lexer, not MySQL's: '...', "..." and `...` with the
quote doubled inside; a backslash escapes nothing. Comments are `-- ...` to the
end of the line and `/* ... */`; nothing in them is translated.
"""
import re
import sqlite3
from collections.abc import Iterable
from typing import Any

# Literals, quoted identifiers and comments (kept whole: no placeholder inside) and
# the placeholders; an unterminated literal or comment runs to the end of the text.
_TOKENS = re.compile(r"""
      '(?:[^']|'')*'?
    | "(?:[^"]|"")*"?
    | `(?:[^`]|``)*`?
    | --[^\n]*
    | /\*.*?(?:\*/|\Z)
    | %s | %% | \?
""", re.DOTALL | re.VERBOSE)
_QMARK = {"%s": "?", "%%": "%"}
_QUOTES = "'\"`"


def to_qmark(sql: str) -> str:
    """`sql` with its `%s` placeholders as `?` and `%%` as `%` (see the module's rule);
    `sql` itself when it is not in that style. Raises sqlite3.ProgrammingError for a
    statement that mixes that style with `?`."""
    found: set[str] = set()

    def translate(match: re.Match[str]) -> str:
        token = match.group()
        if token[0] in _QUOTES and "%%" in token:
            found.add("%%")
            return token.replace("%%", "%")
        found.add(token)
        return _QMARK.get(token, token)

    translated = _TOKENS.sub(translate, sql)
    if not found & _QMARK.keys():
        return sql
    if "?" in found:
        raise sqlite3.ProgrammingError(
            "a statement mixes %s (or %%) and ? placeholders: use one style")
    return translated


class FormatCursor(sqlite3.Cursor):
    """A sqlite3 cursor whose execute() and executemany() also take `%s` placeholders."""

    def execute(self, sql: str, parameters: Any = None, /) -> "FormatCursor":
        if parameters is None:  # as PyMySQL: without parameters, the text is not formatted
            return super().execute(sql)
        return super().execute(to_qmark(sql), parameters)

    def executemany(self, sql: str, seq_of_parameters: Iterable[Any], /) -> "FormatCursor":
        return super().executemany(to_qmark(sql), seq_of_parameters)
