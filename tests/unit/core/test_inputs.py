"""Files from outside, read through one bounded reader: a device, a binary or a hostile
JSON file is one error line, never a hang, an out-of-memory or a traceback."""

import io
import json
import os
import threading
import time
from pathlib import Path

import pytest

from kit.core import inputs
from kit.core.errors import KitError

from ..pipes import unblocked


def test_a_device_is_read_no_further_than_the_cap():
    with pytest.raises(inputs.Unreadable) as e:
        inputs.read_text(Path("/dev/zero"), "--hostfile /dev/zero", "give a text file")
    assert str(e.value) == (
        "--hostfile /dev/zero: larger than 1 MiB, the most kit reads of it; give a text file"
    )


def test_a_pipe_no_one_writes_to_is_one_line_not_a_hang(tmp_path, monkeypatch):
    """open() of a named pipe waits for a writer for ever: kit run --hostfile FIFO hung."""
    fifo = tmp_path / "hosts"
    monkeypatch.setattr(inputs, "PIPE_WAIT", 0.2)
    unblocked(fifo)  # a writer long after the wait: one that waited for it reads an end of file
    with pytest.raises(inputs.Unreadable) as e:
        inputs.read_text(fifo, f"--hostfile {fifo}", "give a text file")
    assert str(e.value) == f"--hostfile {fifo}: a pipe nothing wrote to in 0.2 s; give a text file"


def test_a_pipe_is_read_as_its_writer_writes(tmp_path):
    """A shell's <(...) or a writer that comes a little later: read whole, to its end."""
    fifo = tmp_path / "hosts"
    os.mkfifo(fifo)

    def write() -> None:
        time.sleep(0.2)
        with open(fifo, "w") as f:
            f.write("n1\n")
            f.flush()
            time.sleep(0.2)
            f.write("n2\n")

    threading.Thread(target=write, daemon=True).start()
    assert inputs.read_text(fifo, "f", "") == "n1\nn2\n"


def test_the_cap_is_the_last_byte_read(tmp_path):
    f = tmp_path / "f"
    f.write_bytes(b"x" * 10)
    assert inputs.read_bytes(f, "f", "", limit=10) == b"x" * 10
    with pytest.raises(KitError, match="larger than 9 bytes"):
        inputs.read_bytes(f, "f", "", limit=9)
    assert inputs.bounded(io.BytesIO(b"ab"), "f", "", 2) == b"ab"


@pytest.mark.parametrize(
    ("data", "said"),
    [
        (b"\xff\xfe binary", "f: not UTF-8 text (byte 0); fix it"),
        (b"[" * 100_000, "f: JSON nested deeper than 64 levels; fix it"),  # a RecursionError
        (b"[" * 65 + b"]" * 65, "f: JSON nested deeper than 64 levels; fix it"),
        (b"{not json", "f: not JSON (Expecting property name enclosed in double quotes: "),
    ],
)
def test_what_is_not_json_is_one_line(tmp_path, data, said):
    f = tmp_path / "f"
    f.write_bytes(data)
    with pytest.raises(inputs.Unreadable) as e:
        inputs.read_json(f, "f", "fix it")
    assert str(e.value).startswith(said) and "\n" not in str(e.value)


def test_json_as_deep_as_kit_writes_is_read(tmp_path):
    f = tmp_path / "f"
    deep = json.loads("[" * 64 + "]" * 64)
    f.write_text(json.dumps({"a": [1, {"b": None}]}))
    assert inputs.read_json(f, "f", "") == {"a": [1, {"b": None}]}
    assert inputs.loads(json.dumps(deep), "f", "") == deep


def test_what_kit_can_make_again_is_a_miss_when_unreadable(tmp_path):
    f = tmp_path / "cache.json"
    assert inputs.remade(f) is None  # absent
    f.write_text('{"half": ')
    assert inputs.remade(f) is None  # half-written
    f.write_bytes(b"[" * 100_000)
    assert inputs.remade(f) is None
    f.write_text('{"whole": 1}\n')
    assert inputs.remade(f) == {"whole": 1}
