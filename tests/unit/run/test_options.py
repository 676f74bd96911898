"""kit run's options, declared once: the parser, the request and the rules read one table."""

import dataclasses

from kit import cli
from kit.run import options
from kit.run.checks import RunRequest


def test_the_request_holds_each_option_of_the_table():
    assert [f.name for f in dataclasses.fields(RunRequest)] == [o.dest for o in options.OPTIONS]


def test_the_parser_is_the_tables():
    """kit run's parser declares each option of the table, in its order, with its
    default: a request parsed from nothing is every default."""
    run = cli.commands(cli.parser())["run"]
    declared = [a for a in run._actions if a.dest not in ("help", "quiet", "verbose")]  # kit's
    assert [a.dest for a in declared] == [o.dest for o in options.OPTIONS]
    assert [a.option_strings for a in declared] == [list(o.flags) for o in options.OPTIONS]
    defaults = RunRequest.of(run.parse_args([]))
    assert dataclasses.asdict(defaults) == {o.dest: o.default for o in options.OPTIONS}
    assert RunRequest.parse([]) == defaults
