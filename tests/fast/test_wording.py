"""How the command line words a count (prefork/cli/wording.py): singular for one."""
import pytest

from prefork.cli.wording import counted, line_range


@pytest.mark.parametrize("count,said", [(0, "0 jobs"), (1, "1 job"), (2, "2 jobs")])
def test_a_count_is_singular_for_exactly_one(count, said):
    assert counted(count, "job") == said


def test_a_plural_may_be_given_and_a_range_of_one_line_is_a_line():
    assert counted(3, "old supervisor record") == "3 old supervisor records"
    assert counted(2, "person", "people") == "2 people"
    assert (line_range(7, 7), line_range(7, 9)) == ("line 7", "lines 7-9")
