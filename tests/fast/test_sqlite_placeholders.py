"""The SQLite handler cursor's `%s` placeholders (prefork/store/sqlite/paramstyle.py):
translated outside literals and comments, everything else left as sqlite3 reads it."""
import sqlite3
from contextlib import closing

import pytest

from prefork.store.sqlite.paramstyle import FormatCursor, to_qmark


@pytest.mark.parametrize("sql, expected", [
    ("INSERT INTO t (a, b) VALUES (%s, %s)", "INSERT INTO t (a, b) VALUES (?, ?)"),
    ("SELECT %s", "SELECT ?"),
    ("SELECT a FROM t WHERE a LIKE %s AND b = %s", "SELECT a FROM t WHERE a LIKE ? AND b = ?"),
    # %% is a literal percent, as in PyMySQL, once the statement is translated
    ("SELECT %s %% 3", "SELECT ? % 3"),
    ("SELECT 10 %% 3", "SELECT 10 % 3"),
    # inside string literals nothing is touched, doubled quotes included
    ("SELECT '%s', %s", "SELECT '%s', ?"),
    ("SELECT 'it''s %s', %s", "SELECT 'it''s %s', ?"),
    # ... but %% is a percent inside literals too, as PyMySQL formats the whole text
    ("SELECT '100%%', %s", "SELECT '100%', ?"),
    ("SELECT a FROM t WHERE a LIKE 'x%%'", "SELECT a FROM t WHERE a LIKE 'x%'"),
    ('SELECT "p%%", %s', 'SELECT "p%", ?'),
    ("SELECT '%s %%', %s", "SELECT '%s %', ?"),
    ("SELECT 'a?b', %s", "SELECT 'a?b', ?"),
    ("SELECT '''%s''', %s", "SELECT '''%s''', ?"),
    # quoted identifiers: double quotes and backticks
    ('SELECT "col%s", %s', 'SELECT "col%s", ?'),
    ('SELECT "a""%s", %s', 'SELECT "a""%s", ?'),
    ("SELECT `x%s`, %s", "SELECT `x%s`, ?"),
    # a backslash escapes nothing in SQLite: the literal ends at the next quote
    ("SELECT 'a\\', %s", "SELECT 'a\\', ?"),
    # comments
    ("SELECT %s -- %s and ? and %%\n, %s", "SELECT ? -- %s and ? and %%\n, ?"),
    ("SELECT /* %s ? */ %s", "SELECT /* %s ? */ ?"),
    ("SELECT /* multi\nline %s */ %s", "SELECT /* multi\nline %s */ ?"),
    ("SELECT %s /* unterminated %s", "SELECT ? /* unterminated %s"),
    ("SELECT %s, '-- not a comment', %s", "SELECT ?, '-- not a comment', ?"),
    ("SELECT %s, '/* not a comment */', %s", "SELECT ?, '/* not a comment */', ?"),
    ("SELECT 'a' -- it's a comment\n, %s", "SELECT 'a' -- it's a comment\n, ?"),
    # a quote inside a comment opens no literal
    ("SELECT /* don't */ %s", "SELECT /* don't */ ?"),
    ("SELECT %s /* 5%% */", "SELECT ? /* 5%% */"),
    ("SELECT %s; -- 5%%", "SELECT ?; -- 5%%"),
])
def test_translated(sql, expected):
    assert to_qmark(sql) == expected


@pytest.mark.parametrize("sql", [
    "INSERT INTO t (a, b) VALUES (?, ?)",        # sqlite3's own style
    "INSERT INTO t (a, b) VALUES (?1, ?2)",
    "INSERT INTO t (a) VALUES (:a)",             # named
    "SELECT 10 % 3",                             # the operator, no placeholder
    "SELECT '%s'",                               # %s only inside a literal
    "SELECT 1 -- %s",                            # ... or a comment
    "SELECT '50%'",                              # a lone % in a literal
    "SELECT 1 /* 5%% */",
    "SELECT '%s', ?",                            # %s in a literal is no placeholder
    "",
])
def test_passed_through_unchanged(sql):
    assert to_qmark(sql) is sql


@pytest.mark.parametrize("sql", [
    "SELECT %s, ?",
    "SELECT ?, 10 %% 3",
    "SELECT a FROM t WHERE a LIKE 'x%%' AND b = ?",
])
def test_mixed_styles_refused(sql):
    with pytest.raises(sqlite3.ProgrammingError, match="mixes"):
        to_qmark(sql)


def test_the_cursor_stays_a_sqlite3_cursor():
    with closing(sqlite3.connect(":memory:")) as conn, closing(conn.cursor(FormatCursor)) as cursor:
        assert isinstance(cursor, sqlite3.Cursor)
        cursor.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT, note TEXT)")
        cursor.execute("INSERT INTO t (name, note) VALUES (%s, '%s kept') -- %s", ("a",))
        assert cursor.rowcount == 1 and cursor.lastrowid == 1
        cursor.executemany("INSERT INTO t (name, note) VALUES (%s, %s)",
                           [("b", "100%"), ["c", None]])
        cursor.execute("INSERT INTO t (name) VALUES (?)", ("d",))
        cursor.execute("INSERT INTO t (name) VALUES (:name)", {"name": "e"})
        cursor.execute("SELECT name, note FROM t WHERE name LIKE %s ORDER BY id", ("%",))
        assert cursor.fetchone() == ("a", "%s kept")
        assert cursor.fetchall() == [("b", "100%"), ("c", None), ("d", None), ("e", None)]
        assert cursor.execute("SELECT 7 %% %s, '100%%'", (4,)).fetchone() == (3, "100%")
        # without parameters nothing is translated, with () it is (as PyMySQL does)
        assert cursor.execute("SELECT 7 % 4, '100%%'").fetchone() == (3, "100%%")
        assert cursor.execute("SELECT '100%%'", ()).fetchone() == ("100%",)
