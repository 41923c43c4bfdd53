"""What a failed attempt leaves behind (prefork/failures.py): its error text (class
and message, masked and cut, or the class only), its traceback and the bounded history."""
import json
import sqlite3
from datetime import datetime

import pymysql
import pytest

from prefork.failures import (
    CUT,
    HISTORY_LENGTH,
    MAX_ERROR_LENGTH,
    ErrorWriter,
    appended_history,
    parsed_history,
)

PASSWORD = "p@ss/w0rd"


class CustomerError(Exception):
    pass


def raised(exc):
    """exc with a traceback, as a handler's failure has one."""
    try:
        raise exc
    except BaseException as caught:
        return caught


def test_the_message_is_kept_with_the_class():
    writer = ErrorWriter("message")
    assert writer.describe(ValueError("customer 42 has no billing address")) == \
        "ValueError: customer 42 has no billing address"
    assert writer.describe(CustomerError("no address")) == \
        f"{__name__}.CustomerError: no address"
    assert writer.describe(KeyError("customer")) == "KeyError: 'customer'"
    assert writer.describe(ValueError()) == "ValueError"


def test_database_errors_say_their_code_and_the_servers_words():
    writer = ErrorWriter("message")
    denied = pymysql.err.OperationalError(
        1142, "INSERT command denied to user 'queue_worker'@'localhost' for table 'invoices'")
    assert writer.describe(denied) == ("OperationalError 1142: INSERT command denied to user "
                                       "'queue_worker'@'localhost' for table 'invoices'")
    assert writer.describe(sqlite3.OperationalError("no such table: invoices")) == \
        "OperationalError: no such table: invoices"


def test_the_configured_password_and_url_passwords_are_masked():
    writer = ErrorWriter("message", PASSWORD)
    text = writer.describe(RuntimeError(
        f"login {PASSWORD} failed; dsn mysql://app:p%40ss%2Fw0rd@db/x; "
        "other https://bob:hunter2@example.com/path"))
    assert PASSWORD not in text and "p%40ss%2Fw0rd" not in text and "hunter2" not in text
    assert text == ("RuntimeError: login *** failed; dsn mysql://app:***@db/x; "
                    "other https://bob:***@example.com/path")


def test_a_long_message_is_cut_and_marked():
    text = ErrorWriter("message").describe(ValueError("x" * 5000))
    assert len(text) == MAX_ERROR_LENGTH and text.endswith("x" + CUT)
    exact = "ValueError: " + "y" * (MAX_ERROR_LENGTH - len("ValueError: "))
    assert ErrorWriter("message").describe(ValueError(exact[len("ValueError: "):])) == exact


def test_a_password_at_the_cut_is_masked_before_cutting():
    # Cut first, "p@s" would be left at the end; masked first, none of it is.
    message = "z" * (MAX_ERROR_LENGTH - len("ValueError: ") - 4) + PASSWORD + " tail" * 100
    text = ErrorWriter("message", PASSWORD).describe(ValueError(message))
    assert len(text) == MAX_ERROR_LENGTH and text.endswith(CUT)
    assert "p@s" not in text and "***" in text


def test_a_lone_surrogate_and_a_broken_str_do_not_fail_the_failure():
    class Unprintable(Exception):
        def __str__(self):
            raise RuntimeError("no")

    writer = ErrorWriter("message")
    assert writer.describe(ValueError("bad byte \udc80")) == "ValueError: bad byte \\udc80"
    assert "could not be read" in writer.describe(Unprintable())
    writer.describe(ValueError("\udc80")).encode("utf-8")   # storable


def test_class_only_keeps_todays_class_name():
    writer = ErrorWriter("class", PASSWORD)
    assert writer.describe(ValueError("customer 42")) == "ValueError"
    denied = pymysql.err.OperationalError(1142, "INSERT command denied to user 'alice'")
    assert writer.describe(denied) == "pymysql.err.OperationalError"


def test_the_traceback_is_whole_under_message_and_ends_in_the_class_under_class():
    def handler():
        try:
            raise KeyError("inner 7")
        except KeyError as exc:
            raise ValueError(f"customer 42, password {PASSWORD}") from exc

    exc = raised_from(handler)
    full = ErrorWriter("message", PASSWORD).traceback(exc)
    assert full.startswith("Traceback (most recent call last):")
    assert "in handler" in full and "KeyError: 'inner 7'" in full   # the chain too
    assert full.endswith("ValueError: customer 42, password ***") and PASSWORD not in full
    bare = ErrorWriter("class", PASSWORD).traceback(exc)
    assert bare.startswith("Traceback (most recent call last):")
    assert ", in handler" in bare and bare.splitlines()[-1] == "ValueError"
    assert "customer 42" not in bare and "inner 7" not in bare   # no message, no source line


def raised_from(function):
    try:
        function()
    except Exception as exc:
        return exc
    raise AssertionError("did not raise")


def test_the_history_keeps_the_last_attempts_oldest_first():
    history = None
    for attempt in range(1, HISTORY_LENGTH + 4):
        history = appended_history(history, attempt, datetime(2026, 12, 1, 8, 0, attempt),
                                   f"error {attempt}")
    entries = json.loads(history)
    assert [entry["attempt"] for entry in entries] == list(range(4, HISTORY_LENGTH + 4))
    assert entries[-1] == {"attempt": HISTORY_LENGTH + 3, "at": "2026-12-01T08:00:13.000+00:00",
                           "error": f"error {HISTORY_LENGTH + 3}"}


@pytest.mark.parametrize("stored", [None, "", "not json", '{"a": 1}'])
def test_a_missing_or_foreign_history_reads_as_empty(stored):
    assert parsed_history(stored) == []
    assert len(json.loads(appended_history(stored, 1, datetime(2026, 1, 1), "e"))) == 1
