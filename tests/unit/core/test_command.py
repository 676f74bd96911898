"""A user's command as the benchmark: its figure read from its output, or why not."""

import pytest

from kit.core import command, readers
from kit.core.errors import KitError


def cmd(reduce="last", require="", higher=True):
    pattern = command.pattern(r"throughput: (?P<throughput>[0-9.]+) samples/s")
    return command.Command(
        "train", ("python", "t.py"), (), pattern, "samples/s", higher, reduce, require
    )


OUT = "epoch 1\nthroughput: 800.0 samples/s\nepoch 2\nthroughput: 812.5 samples/s\n"


def read(c: command.Command, output: str) -> dict | str:
    """What c's reader makes of output, fed a line at a time as a trial's is."""
    reader = c.reader()
    for line in output.splitlines():
        reader.line(line)
    return reader.result()


def test_the_figure_is_the_named_group_reduced_over_every_matching_line():
    got = read(cmd(), OUT)
    assert got["value"] == 812.5 and got["matches"] == [800.0, 812.5]
    assert got["metric"] == {"key": "value", "name": "throughput", "unit": "samples/s",
                             "higher_is_better": True}  # fmt: skip
    assert read(cmd("sum"), OUT)["value"] == 1612.5
    assert read(cmd("mean"), OUT)["value"] == 806.25
    assert read(cmd("first"), OUT)["value"] == 800.0


def test_no_figure_is_a_reason_never_a_number():
    assert read(cmd(), "loss 0.3\n") == (
        r"no line of the output matched --metric 'throughput: (?P<throughput>[0-9.]+) samples/s'"
    )
    assert read(cmd(require="^done$"), OUT) == "no line of the output matched --require '^done$'"
    assert read(cmd(require="^done$"), OUT + "done\n")["value"] == 812.5
    odd = command.Command("x", ("x",), (), r"v=(?P<v>\S+)", "", True, "last")
    assert read(odd, "v=1.2.3\n") == "--metric group 'v' matched '1.2.3', not a finite number"


def test_no_finite_figure_and_too_many_matches_are_reasons(monkeypatch):
    """float() reads nan, inf and 1e999; an optional group may take no part in a match;
    a pattern matching every line of an endless output would hold every value."""
    any_word = command.Command("x", ("x",), (), r"v=(?P<v>\S+)", "", True, "last")
    for spelled in ("nan", "inf", "-Infinity", "1e999"):
        said = read(any_word, f"v=1.0\nv={spelled}\n")
        assert said == f"--metric group 'v' matched '{spelled}', not a finite number"
    lax = command.Command("x", ("x",), (), r"(?P<v>[0-9]+)?", "", True, "last")
    assert (
        read(lax, "none\n")
        == "--metric '(?P<v>[0-9]+)?' matched, but its group 'v' took no part: no figure"
    )
    assert read(lax, "v 12\n")["value"] == 12.0
    monkeypatch.setattr(command, "MAX_MATCHES", 3)
    assert read(cmd(), OUT)["matches"] == [800.0, 812.5]
    assert read(cmd(), OUT * 2) == (
        r"--metric 'throughput: (?P<throughput>[0-9.]+) samples/s' matched more than 3 times; "
        "match only the lines that give the figure (one a rank, or an epoch)"
    )


def test_a_mean_of_figures_near_the_float_limit_is_their_mean_and_a_sum_past_it_is_none():
    """Two matches of 1.7e308: fmean's sum of them overflowed (an OverflowError mid-
    campaign); their mean is 1.7e308, and their sum, an infinity, is no figure."""
    big = f"throughput: 17{'0' * 307} samples/s\n" * 2  # 1.7e308 in the pattern's digits
    assert read(cmd("mean"), big)["value"] == 1.7e308
    reader = cmd("sum").reader()
    for line in big.splitlines():
        reader.line(line)
    assert readers.read_result(reader) == (
        None,
        "metric 'throughput' read inf: a figure must be finite and above 0",
    )


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
