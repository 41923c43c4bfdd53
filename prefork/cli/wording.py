"""How the command line words a count: "1 job", "2 jobs", "0 jobs"."""


def counted(count: int, noun: str, plural: str = "") -> str:
    """The count and its noun, singular for exactly one (plural: the noun + "s" unless
    given)."""
    return f"{count} {noun if count == 1 else plural or noun + 's'}"


def line_range(first: int, last: int) -> str:
    """Lines of a file: "line 7", "lines 7-9"."""
    return f"line {first}" if first == last else f"lines {first}-{last}"
