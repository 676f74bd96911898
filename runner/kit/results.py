"""The results store: one JSON line per trial in DIR/trials.jsonl, appended as each ends.

Each record is written with one O_APPEND write and fsync'd before the next
trial starts, so a campaign killed at any point keeps every finished trial; a
line cut short by a kill during the write is skipped on reading, with a warning.
"""

import json
import os
import sys
from pathlib import Path

FILE = "trials.jsonl"
SCHEMA = "kit.trial/1"


def append(out_dir: Path, record: dict) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    line = (json.dumps(record, sort_keys=True) + "\n").encode()
    fd = os.open(out_dir / FILE, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
        os.fsync(fd)
    finally:
        os.close(fd)


def load(out_dir: Path) -> list[dict]:
    path = out_dir / FILE
    if not path.is_file():
        return []
    records = []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            print(f"kit: warning: {path}:{n} is not a complete record (skipped)", file=sys.stderr)
    return records
