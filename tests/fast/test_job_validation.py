"""What jobs.new_job accepts: whatever passes must be insertable, the same way, on
both backends; whatever fails is one UserError line. And what Job.decode_payload
treats as permanent. No database: the end-to-end checks are in tests/cli/test_inputs.py."""
import pytest

from prefork.errors import RejectedJob, UserError
from prefork.jobs import MAX_PAYLOAD_DEPTH, TOO_DEEP, Job, json_depth, new_job


def nested(depth):
    return '{"a":' * (depth - 1) + "{}" + "}" * (depth - 1)


def refused(**arguments):
    """The one-line message new_job refuses these arguments with."""
    arguments.setdefault("job_type", "noop")
    with pytest.raises(UserError) as caught:
        new_job(**arguments)
    message = str(caught.value)
    assert "\n" not in message
    return message


@pytest.mark.parametrize("name", ["default\n", "default\r", "\ndefault", "def ault", "dé", "a\x00",
                                  "", "x" * 65])
def test_a_queue_name_must_match_whole(name):
    assert "invalid queue name" in refused(queue=name)


@pytest.mark.parametrize("job_type", ["noop\n", "no\x00op", "no\x85op", "", "x" * 129])
def test_a_job_type_must_match_whole(job_type):
    assert "invalid job type" in refused(job_type=job_type)


@pytest.mark.parametrize("key,words", [
    ("invoice-7 ", "whitespace"), (" invoice-7", "whitespace"), ("invoice-7\u3000", "whitespace"),
    ("a\x00b", "control"), ("a\x1fb", "control"), ("a\x7fb", "control"), ("a\x9fb", "control"),
    ("a\nb", "control"), ("a\udcffb", "lone surrogate"), ("", "1-191"), ("k" * 192, "1-191"),
])
def test_a_key_is_refused_unless_both_backends_store_and_compare_it_alike(key, words):
    assert words in refused(key=key)


@pytest.mark.parametrize("key", ["invoice-7", "a b", "k" * 191, "café-😀", "x\u00a0y"])
def test_ordinary_keys_pass(key):
    assert new_job("noop", key=key).key == key


@pytest.mark.parametrize("payload", ['{"s": "\\ud800"}', {"s": "\udc80"}, {"\ud800": 1}])
def test_a_payload_with_a_lone_surrogate_is_refused(payload):
    assert "lone surrogate" in refused(payload=payload)


@pytest.mark.parametrize("payload", [nested(MAX_PAYLOAD_DEPTH + 1), nested(1000),
                                     "[" * 100_000 + "]" * 100_000, '{"a":' + "[" * 70 + "]" * 70
                                     + "}"])
def test_a_payload_deeper_than_the_limit_is_refused_naming_it(payload):
    message = refused(payload=payload, max_payload_bytes=10 ** 6)
    assert TOO_DEEP in message and str(MAX_PAYLOAD_DEPTH) in message


def test_a_payload_at_the_limit_passes_and_brackets_in_strings_do_not_count():
    assert new_job("noop", nested(MAX_PAYLOAD_DEPTH)).payload_text == nested(MAX_PAYLOAD_DEPTH)
    assert json_depth('{"a":"[[[{{{\\"]]]","b":[[1],{"c":"\\\\["}]}') == 3
    assert new_job("noop", {"s": "[" * 500}).payload_text == '{"s":"' + "[" * 500 + '"}'


def test_a_stored_payload_too_deep_to_parse_is_rejected_not_retried():
    job = Job(1, "noop", "default", nested(100_000), 1, 5, None, "token")
    with pytest.raises(RejectedJob, match=f"^{TOO_DEEP}$"):
        job.decode_payload(10 ** 7)
