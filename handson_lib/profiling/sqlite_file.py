"""Profiles are SQLite files: open one read-only, list its tables and columns, query it."""

import sqlite3
from pathlib import Path

from handson_lib.messages import tr
from handson_lib.profiling.model import HOW_TO_EXPORT, ProfileFormatError

SQLITE_MAGIC = b"SQLite format 3\x00"


def open_readonly(path):
    path = Path(path)
    if not path.exists():
        raise ProfileFormatError(f"{path}: no such file. {HOW_TO_EXPORT}.")
    if not path.is_file():
        raise ProfileFormatError(f"{path} is a directory, not a profile. {HOW_TO_EXPORT}.")
    with open(path, "rb") as handle:
        head = handle.read(len(SQLITE_MAGIC))
    if head != SQLITE_MAGIC:
        if path.suffix in (".nsys-rep", ".qdrep"):
            raise ProfileFormatError(
                f"{path} is an Nsight Systems report, not its SQLite export: run "
                f"`nsys export --type sqlite -o {path.with_suffix('.sqlite').name} {path.name}` "
                f"and summarize the .sqlite file.")
        what = "an empty file" if not head else "not an SQLite file"
        raise ProfileFormatError(f"{path} is {what}. {HOW_TO_EXPORT}.")
    try:
        con = sqlite3.connect(path.resolve().as_uri() + "?mode=ro", uri=True)
        con.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.DatabaseError as error:
        raise ProfileFormatError(f"{path}: SQLite cannot read it ({error}). {HOW_TO_EXPORT}.") from None
    return con


def table_names(con):
    return {name for (name,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def column_names(con, table):
    return {row[1] for row in con.execute(f'PRAGMA table_info("{table}")')}


def print_query(con, sql, params=(), limit=20):
    """Run one SQL query and print its rows under their column names (at most `limit` rows)."""
    cursor = con.execute(sql, params)
    headers = [d[0] for d in cursor.description]
    rows = cursor.fetchmany(limit + 1)
    shown = [[str(v) for v in row] for row in rows[:limit]]
    widths = [max([len(h)] + [len(r[i]) for r in shown]) for i, h in enumerate(headers)]
    print("  ".join(h.ljust(w) for h, w in zip(headers, widths)))
    for row in shown:
        print("  ".join(v.ljust(w) for v, w in zip(row, widths)))
    if len(rows) > limit:
        print(tr("... (more rows; first {limit} shown)", limit=limit))
