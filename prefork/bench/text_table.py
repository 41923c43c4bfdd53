"""The bench report's plain-text tables: a column is a header and the text of its
cell in a row; every cell is right-aligned under its header."""
from typing import Any, Callable, Dict, List, Sequence, Tuple

Row = Dict[str, Any]
Column = Tuple[str, Callable[[Row], str]]


def number(key: str, fmt: str) -> Callable[[Row], str]:
    """A cell of one figure, "-" when the row has none."""
    return lambda row: "-" if row.get(key) is None else fmt.format(row[key])


def pair(first: str, second: str, fmt: str = "{:.1f}") -> Callable[[Row], str]:
    """One cell for two figures: "61.2/4.3" ("-" for a missing one)."""
    def text(row: Row) -> str:
        if row.get(first) is None:
            return "-"
        return "/".join(number(key, fmt)(row) for key in (first, second))
    return text


def table_lines(columns: Sequence[Column], rows: Sequence[Row], indent: str = "") -> List[str]:
    """The header line, then a line per row."""
    cells = [[header for header, _ in columns]]
    cells += [[text(row) for _, text in columns] for row in rows]
    widths = [max(len(line[i]) for line in cells) for i in range(len(columns))]
    return [indent + "  ".join(text.rjust(width) for text, width in zip(line, widths))
            for line in cells]
