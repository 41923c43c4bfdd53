"""Command jobs' argv templates: how a [command:TYPE] argv is cut into parts and how a
job's payload fills them (pure: no program is looked up or run)."""
import pytest

from prefork.errors import RejectedJob, UserError
from prefork.worker.commands import CommandSpec, option_refusal, parse_argv, render_argv

NASTY = "a b; $(touch /tmp/pwned) `id` 'q\" * \\ | && {label} ~ $HOME\ttab"


def spec(argv_text, allow_option_values=False):
    return CommandSpec("probe", parse_argv(argv_text, UserError), timeout=None, cwd=None, env=(),
                       allow_option_values=allow_option_values)


def test_each_placeholder_fills_exactly_its_own_argument():
    probe = spec("php artisan {mode} --label={label} 'two words' {{literal}} {a}{b} {n}")
    payload = {"mode": "ok", "label": NASTY, "a": 7, "b": True, "n": 2.5}
    assert render_argv(probe, payload) == [
        "php", "artisan", "ok", f"--label={NASTY}", "two words", "{literal}", "7true", "2.5"]
    assert probe.placeholders() == ["a", "b", "label", "mode", "n"]


def test_a_template_is_cut_into_text_and_field_parts():
    assert parse_argv("tool x{{y}}z {name}-{other}", UserError) == (
        (("text", "tool"),),
        (("text", "x{y}z"),),
        (("field", "name"), ("text", "-"), ("field", "other")))


def test_booleans_and_numbers_are_written_as_json_would():
    probe = spec("tool {value}", allow_option_values=True)
    assert [render_argv(probe, {"value": value})[1] for value in (False, 0, -3, 1e100)] == [
        "false", "0", "-3", "1e+100"]


def test_a_value_is_never_split_or_expanded():
    probe = spec("tool {value}", allow_option_values=True)
    for value in ("", " ", "two words", "$HOME", "*", "--flag=x y", "{label}"):
        assert render_argv(probe, {"value": value}) == ["tool", value]


@pytest.mark.parametrize("template, payload, named", [
    ("sort {file}", {"file": "--output=s3cr3t"}, "file"),
    ("sort {file}", {"file": "-"}, "file"),
    ("sort {file}", {"file": -3}, "file"),
    ("sort -- {file}", {"file": "-s3cr3t"}, "file"),        # `--` does not lift the rule
    ("tool {a}{b}", {"a": "", "b": "-s3cr3t"}, "b"),        # the placeholder the "-" came from
    ("tool {a}{b}", {"a": "-s3cr3t", "b": "x"}, "a"),
    ("tool {a}-x", {"a": ""}, "a"),                         # empty, it let the text lead
])
def test_a_value_that_would_begin_an_argument_with_a_dash_is_refused(template, payload, named):
    with pytest.raises(RejectedJob) as caught:
        render_argv(spec(template), payload)
    assert str(caught.value) == option_refusal(named) and "s3cr3t" not in str(caught.value)
    assert render_argv(spec(template, allow_option_values=True), payload)[-1].startswith("-")


@pytest.mark.parametrize("template, payload", [
    ("tool --label={file}", {"file": "-x"}),    # inside an option of the template: its value
    ("tool x{file}", {"file": "-x"}),
    ("tool {file}", {"file": "x-"}),
    ("tool {file}", {"file": " -x"}),
    ("tool {file}", {"file": ""}),
])
def test_a_dash_that_cannot_start_an_argument_is_kept(template, payload):
    assert render_argv(spec(template), payload)[-1].endswith(payload["file"])


@pytest.mark.parametrize("payload, complaint", [
    ({}, "command placeholder {record}: no such key in the payload"),
    ({"record": {"secret": "s3cr3t"}}, "command placeholder {record}: the value must be"),
    ({"record": ["s3cr3t"]}, "command placeholder {record}: the value must be"),
    ({"record": None}, "command placeholder {record}: the value must be"),
    ({"record": "s3cr3t\0"}, "command placeholder {record}: the value must be"),
])
def test_a_payload_that_cannot_fill_the_placeholders_is_refused_without_its_value(
        payload, complaint):
    with pytest.raises(RejectedJob) as caught:
        render_argv(spec("tool {record}"), payload)
    assert str(caught.value).startswith(complaint) and "s3cr3t" not in str(caught.value)


@pytest.mark.parametrize("template, complaint", [
    ("", "argv is required"),
    ("{program} --help", "the program (first argv element) cannot be a placeholder"),
    ("pre{program}", "the program (first argv element) cannot be a placeholder"),
    ("tool 'unbalanced", "argv cannot be split"),
    ("tool {oops", "argv element 2: stray '{'"),
    ("tool oops}", "argv element 2: stray '}'"),
    ("tool {a.b}", "argv element 2: stray '{'"),
    ("tool {}", "argv element 2: stray '{'"),
])
def test_a_bad_template_is_refused(template, complaint):
    with pytest.raises(UserError) as caught:
        parse_argv(template, UserError)
    assert complaint in str(caught.value)
