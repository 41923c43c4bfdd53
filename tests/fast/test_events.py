"""The one catalogue of event names (prefork/events.py): every event the package logs is
declared there, every entry is logged somewhere, and logs.event() refuses the rest.

The package's source is read, not run: each call of event() gives its name as a
string, as `Event.NAME`, as a choice of two (`"a" if x else "b"`), or as a
parameter of the function around it (worker/loop.py's give_back(job,
"claim_released")), whose callers then give the name.
"""
import ast
import logging
from pathlib import Path

import pytest

from prefork import logs
from prefork.events import Event, named

PACKAGE = Path(__file__).resolve().parents[2] / "prefork"
DECLARED = {member.value for member in Event}


class EventUse:
    def __init__(self, names, level, where):
        self.names, self.level, self.where = names, level, where


def _callee(call):
    func = call.func
    return func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)


def _names(node):
    """The event names an expression can be, or None if it is not a literal name."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value}
    if isinstance(node, ast.IfExp):
        body, orelse = _names(node.body), _names(node.orelse)
        return body | orelse if body is not None and orelse is not None else None
    if isinstance(node, ast.Attribute) and getattr(node.value, "id", None) == "Event":
        return {Event[node.attr].value}
    return None


def _level(call):
    """The logging level a call passes as a constant (logging.WARNING), else None."""
    for keyword in call.keywords:
        if keyword.arg == "level":
            name = getattr(keyword.value, "attr", None)
            return getattr(logging, name) if name in ("DEBUG", "INFO", "WARNING", "ERROR") \
                else "varies"
    return None


def _argument(call, index, name):
    if index < len(call.args):
        return call.args[index]
    return next((keyword.value for keyword in call.keywords if keyword.arg == name), None)


def _positional_params(function):
    params = [arg.arg for arg in function.args.args]
    return params[1:] if params[:1] in (["self"], ["cls"]) else params


def event_uses():
    """Every place the package names an event, with the level it passes."""
    trees = {path: ast.parse(path.read_text(), str(path)) for path in PACKAGE.rglob("*.py")}
    uses, carriers = [], {}   # carriers: function name -> (parameter index, name, level)
    for path, tree in trees.items():
        for function in ast.walk(tree):
            if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            params = _positional_params(function)
            for call in ast.walk(function):
                if isinstance(call, ast.Call) and _callee(call) == "event" and call.args \
                        and getattr(call.args[0], "id", None) in params:
                    param = call.args[0].id
                    carriers[function.name] = (params.index(param), param, _level(call))
    for path, tree in trees.items():
        for call in (node for node in ast.walk(tree) if isinstance(node, ast.Call)):
            where = f"{path.relative_to(PACKAGE.parent)}:{call.lineno}"
            callee = _callee(call)
            if callee == "event" and call.args:
                names = _names(call.args[0])
                if names is None and getattr(call.args[0], "id", None) in {
                        param for _, param, _ in carriers.values()}:
                    continue   # a carrier's own call: its callers name the event
                uses.append(EventUse(names, _level(call), where))
            elif callee in carriers:
                index, param, level = carriers[callee]
                argument = _argument(call, index, param)
                if argument is not None:
                    uses.append(EventUse(_names(argument), level, where))
    return uses


USES = event_uses()


def test_the_source_names_events_and_its_calls_are_found():
    assert len(USES) > 40
    unreadable = [use.where for use in USES if use.names is None]
    assert not unreadable, f"event names that are neither literals nor Event members: {unreadable}"


def test_every_event_the_package_logs_is_in_the_catalogue():
    unknown = sorted(f"{name} ({use.where})" for use in USES for name in use.names
                     if name not in DECLARED)
    assert not unknown, f"declare these in prefork/events.py: {unknown}"


def test_every_catalogue_entry_is_logged_somewhere():
    used = {name for use in USES for name in use.names}
    dead = sorted(DECLARED - used)
    assert not dead, f"catalogue entries no code logs: {dead}"


def test_a_level_given_at_a_call_is_the_one_the_catalogue_declares():
    wrong = sorted(f"{name} at {use.where}: {logging.getLevelName(use.level)}"
                   for use in USES if isinstance(use.level, int) for name in use.names
                   if name in DECLARED and named(name).level != use.level)
    assert not wrong, f"levels that differ from prefork/events.py: {wrong}"


def test_every_entry_has_a_meaning_and_a_level():
    for member in Event:
        assert member.meaning and "\n" not in member.meaning, member
        assert member.level in (logging.DEBUG, logging.INFO, logging.WARNING, logging.ERROR)
        assert member == member.value == str(member) and named(member.value) is member


# -- logs.event() ----------------------------------------------------------------------

def test_event_refuses_a_name_the_catalogue_does_not_declare(logged):
    with pytest.raises(ValueError, match="unknown event name 'job_claimd'"):
        logs.event("job_claimd", job_id=1)
    assert logged == []


def test_event_takes_a_member_or_its_string_and_logs_the_plain_name(logged):
    logs.event(Event.JOB_CLAIMED, job_id=1)
    logs.event("job_claimed", job_id=2)
    assert [(record.msg, type(record.msg), record.prefork_fields) for record in logged] == [
        ("job_claimed", str, {"job_id": 1}), ("job_claimed", str, {"job_id": 2})]


def test_event_logs_at_the_catalogue_level_unless_told_otherwise(logged):
    logs.event("restart_backoff", failures=3)
    logs.event("worker_exited", level=logging.WARNING, pid=7)
    logs.event("worker_exited", pid=8)
    assert [record.levelno for record in logged] == [logging.WARNING, logging.WARNING,
                                                      logging.INFO]
