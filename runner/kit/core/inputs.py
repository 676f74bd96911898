"""Files kit reads from outside: host lists, Dockerfiles, recipes, Slurm site files, a
campaign's and a preset's settings (TOML too), manifests and cache metadata, an archive's manifest.

Each is read through here, so a device (/dev/zero), a pipe no one writes to, a binary or a
hostile file is one error line naming the file, never a hang, an out-of-memory or a
traceback: at most `limit` bytes are read, the text must be UTF-8, and JSON may nest at
most JSON_DEPTH levels (Python's parser recurses: `[` x 100,000 is a RecursionError, not a
ValueError).
"""

import json
import os
import re
import select
import stat
import tomllib
from pathlib import Path
from typing import BinaryIO

from kit.core.errors import KitError

TEXT_LIMIT = 1 << 20  # 1 MiB: a host file (50,000 hosts), a Dockerfile, a Slurm site file
JSON_LIMIT = 16 << 20  # 16 MiB: campaign.json, preset.json, manifests, cache metadata
JSON_DEPTH = 64  # levels of nested [ and {; kit's own files nest 4 at most
PIPE_WAIT = 10.0  # seconds a named pipe may stay silent before it is refused, not waited on


class Unreadable(KitError):
    """A file that is too large, not UTF-8, or not the JSON it should be; a cache catches
    it to make the file anew."""


def _fail(what: str, why: str, fix: str) -> Unreadable:
    return Unreadable(f"{what}: {why}; {fix}")


def bounded(f: BinaryIO, what: str, fix: str, limit: int) -> bytes:
    """At most `limit` bytes of an open file (one byte more tells that there is more)."""
    data = f.read(limit + 1)
    if len(data) > limit:
        raise _fail(what, f"larger than {_size(limit)}, the most kit reads of it", fix)
    return data


def read_bytes(path: Path, what: str, fix: str, limit: int = TEXT_LIMIT) -> bytes:
    """The file's bytes, at most `limit` of them (what: how the message names it). A named
    pipe is opened without waiting for a writer (open() waits for ever when none comes),
    then given PIPE_WAIT seconds to say something: a shell's <(...) is read as it writes."""
    try:
        with open(os.open(path, os.O_RDONLY | os.O_NONBLOCK), "rb") as f:
            quiet = stat.S_ISFIFO(os.fstat(f.fileno()).st_mode) and not _said(f, PIPE_WAIT)
            if quiet:
                raise _fail(what, f"a pipe nothing wrote to in {PIPE_WAIT:g} s", fix)
            os.set_blocking(f.fileno(), True)
            return bounded(f, what, fix, limit)
    except OSError as e:
        raise _fail(what, f"unreadable ({e.strerror or e})", fix) from None


def _said(f: BinaryIO, seconds: float) -> bool:
    """Whether a pipe has something to read (or its writer has closed it) within seconds."""
    return bool(select.select([f], [], [], seconds)[0])


def text(data: bytes, what: str, fix: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise _fail(what, f"not UTF-8 text (byte {e.start})", fix) from None


def read_text(path: Path, what: str, fix: str, limit: int = TEXT_LIMIT) -> str:
    """The file as UTF-8 text, at most `limit` bytes of it."""
    return text(read_bytes(path, what, fix, limit), what, fix)


def loads(data: bytes | str, what: str, fix: str) -> object:
    """JSON parsed, or an Unreadable naming why not (the parse, or too deep a nesting)."""
    source = text(data, what, fix) if isinstance(data, bytes) else data
    try:
        value = json.loads(source)
    except RecursionError:
        raise _too_deep(what, fix) from None
    except ValueError as e:
        raise _fail(what, f"not JSON ({e})", fix) from None
    if _depth(value) > JSON_DEPTH:
        raise _too_deep(what, fix)
    return whole(value) if LONE_ESCAPE.search(source) else value


LONE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")  # how JSON spells a surrogate: maybe lone
LONE = re.compile("[\ud800-\udfff]")  # one json.loads did not pair: no character


def whole(value: object) -> object:
    """value with each lone surrogate ("\\udcff", valid JSON, no character) in its strings
    made U+FFFD: such a string cannot be written as UTF-8 (a UnicodeEncodeError
    traceback from the report, the catalogue, a terminal)."""
    if isinstance(value, str):
        return LONE.sub("\ufffd", value)
    if isinstance(value, dict):
        return {whole(k): whole(v) for k, v in value.items()}
    if isinstance(value, list):
        return [whole(v) for v in value]
    return value


def read_json(path: Path, what: str, fix: str, limit: int = JSON_LIMIT) -> object:
    """The file's JSON, at most `limit` bytes of it."""
    return loads(read_bytes(path, what, fix, limit), what, fix)


def read_toml(path: Path, what: str, fix: str, kind: str) -> dict:
    """The file's TOML, or an Unreadable naming why not (kind: what the file should be,
    for the message when tomllib recursed too deep into nested arrays and tables)."""
    source = read_text(path, what, fix)
    try:
        return tomllib.loads(source)
    except tomllib.TOMLDecodeError as e:
        raise _fail(what, f"not valid TOML ({e})", fix) from None
    except RecursionError:
        raise _fail(what, f"nested too deeply to be {kind}", fix) from None


def remade(path: Path) -> object:
    """The JSON of a file kit wrote and can write again (a cache's metadata, a manifest),
    or None when it is absent or unreadable: a miss, made anew, never an error."""
    try:
        return read_json(path, str(path), "it is made anew")
    except Unreadable:
        return None


def _too_deep(what: str, fix: str) -> Unreadable:
    return _fail(what, f"JSON nested deeper than {JSON_DEPTH} levels", fix)


def _depth(value: object) -> int:
    """How deep lists and objects nest (iteratively: the value may be deep)."""
    deepest, todo = 0, [(value, 1)]
    while todo:
        v, d = todo.pop()
        if isinstance(v, dict | list):
            deepest = max(deepest, d)
            if d <= JSON_DEPTH:
                todo.extend((x, d + 1) for x in (v.values() if isinstance(v, dict) else v))
    return deepest


def _size(n: int) -> str:
    return f"{n >> 20} MiB" if n >= 1 << 20 else f"{n} bytes"
