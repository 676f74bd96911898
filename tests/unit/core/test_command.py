"""A user's command as the benchmark: its figure read from its output, or why not."""

import pytest

from kit.core import command
from kit.core.errors import KitError


def cmd(reduce="last", require="", higher=True):
    pattern = command.pattern(r"throughput: (?P<throughput>[0-9.]+) samples/s")
    return command.Command(
        "train", ("python", "t.py"), (), pattern, "samples/s", higher, reduce, require
    )


OUT = "epoch 1\nthroughput: 800.0 samples/s\nepoch 2\nthroughput: 812.5 samples/s\n"


def test_the_figure_is_the_named_group_reduced_over_every_matching_line():
    got = cmd().read(OUT)
    assert got["value"] == 812.5 and got["matches"] == [800.0, 812.5]
    assert got["metric"] == {"key": "value", "name": "throughput", "unit": "samples/s",
                             "higher_is_better": True}  # fmt: skip
    assert cmd("sum").read(OUT)["value"] == 1612.5
    assert cmd("mean").read(OUT)["value"] == 806.25
    assert cmd("first").read(OUT)["value"] == 800.0


def test_no_figure_is_a_reason_never_a_number():
    assert cmd().read("loss 0.3\n") == (
        r"no line of the output matched --metric 'throughput: (?P<throughput>[0-9.]+) samples/s'"
    )
    assert cmd(require="^done$").read(OUT) == "no line of the output matched --require '^done$'"
    assert cmd(require="^done$").read(OUT + "done\n")["value"] == 812.5
    odd = command.Command("x", ("x",), (), r"v=(?P<v>\S+)", "", True, "last")
    assert odd.read("v=1.2.3\n") == "--metric group 'v' matched '1.2.3', not a number"


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("throughput: ([0-9.]+)", "exactly one named group"),
        ("(?P<a>1)(?P<b>2)", "exactly one named group"),
        ("(?P<a>[0-9", "is not a regular expression"),
    ],
)
def test_a_metric_needs_one_named_group(text, says):
    with pytest.raises(KitError, match=says):
        command.pattern(text)


def test_a_command_line_is_split_like_a_shell_line_and_never_run_by_one():
    assert command.split("--command", "python 't r.py' --x=1 $HOME") == (
        "python", "t r.py", "--x=1", "$HOME",
    )  # fmt: skip
    with pytest.raises(KitError, match="check its quotes"):
        command.split("--command", "python 'unclosed")
    with pytest.raises(KitError, match="is empty"):
        command.split("--command", "  ")
