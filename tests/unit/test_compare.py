"""kit compare, kit check, kit history and kit export on synthetic campaigns."""

import dataclasses
import json
import math
from pathlib import Path

import pytest

from kit import cli
from kit.across import compare
from kit.analysis import stats, summary
from kit.core.errors import EXIT_UNDECIDED, KitError
from kit.results import catalogue, mllog, store
from tests.unit.records import campaign_folder

ARMS = {"native": 1.0, "docker": 1.0}


def kit(capsys, *args: str) -> tuple[int, str, str]:
    code = cli.main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_a_10_percent_cut_is_found_with_0_90_inside_its_interval(tmp_path, capsys):
    a = campaign_folder(tmp_path / "a", "c1", 20, ARMS, seed=1)
    b = campaign_folder(tmp_path / "b", "c2", 20, {"native": 1.0, "docker": 0.9}, seed=2)
    c = compare.compare(compare.side(str(a), None), compare.side(str(b), None))
    (docker,) = [ch for ch in c.changes if ch.runtime == "docker"]
    assert docker.interval.low < 0.90 < docker.interval.high
    assert docker.interval.high < 0.95 and docker.verdict.startswith("changed by -")
    (native,) = [ch for ch in c.changes if ch.runtime == "native"]
    assert native.verdict.startswith("no change larger than ±")
    assert c.each == pytest.approx(1 - 0.05 / 2)  # docker and native: one family
    code, out, _ = kit(capsys, "compare", str(a), str(b))
    assert code == 0
    (line,) = [x for x in out.splitlines() if x.strip().startswith("docker")]
    assert "ratio to native" in line and "changed by -" in line


def test_identical_campaigns_say_no_change_larger_than_the_interval_allows(tmp_path):
    a = campaign_folder(tmp_path / "a", "c1", 12, ARMS, seed=3)
    b = campaign_folder(tmp_path / "b", "c2", 12, ARMS, seed=4)
    c = compare.compare(compare.side(str(a), None), compare.side(str(b), None))
    assert [ch.runtime for ch in c.changes] == ["native", "docker"]
    for ch in c.changes:
        bound = max(ch.interval.high - 1, 1 - ch.interval.low) * 100
        assert ch.verdict == f"no change larger than ±{bound:.1f} %"
        assert 0 < bound < 10


def test_a_trial_read_twice_counts_once(tmp_path):
    """A pasted line would narrow every interval: a side reads each trial once."""
    a = campaign_folder(tmp_path / "a", "c1", 12, ARMS, seed=3)
    once = compare.side(str(a), None).records
    log = a / "trials.jsonl"
    log.write_text(log.read_text() * 2)
    assert compare.side(str(a), None).records == once and len(once) == 24


def test_the_change_interval_holds_welchs_and_the_exact_rank_interval():
    a, b = [0.0, 0.1, 0.2, 0.05, 0.15], [0.3, 0.35, 0.5, 0.4, 0.45]
    iv = compare.change(a, b, 0.95)
    rank = stats.two_sample_shift_ci(b, a, 0.95)
    assert iv.low <= math.exp(rank.low) and iv.high >= math.exp(rank.high)
    assert iv.value == pytest.approx(math.exp(0.4 - 0.1))
    assert compare.change([0.1, 0.2], b, 0.95) is None  # too few rounds on one side
    assert compare.verdict(None) == "too few rounds (need 3 on each side)"


def test_configurations_that_differ_are_refused_naming_the_difference(tmp_path, capsys):
    a = campaign_folder(tmp_path / "a", "c1", 4, ARMS, steps=100)
    b = campaign_folder(tmp_path / "b", "c2", 4, ARMS, steps=50)
    code, out, err = kit(capsys, "compare", str(a), str(b))
    assert code == 2 and not out
    assert err == (
        "kit: error: A and B measured different configurations (steps 100 in A, 50 in B); "
        "compare campaigns of the same configuration\n"
    )


def test_an_arm_counted_as_another(tmp_path, capsys):
    a = campaign_folder(tmp_path / "a", "c1", 10, ARMS, seed=5)
    b = campaign_folder(tmp_path / "b", "c2", 10, {"native": 1, "docker@cut10": 0.9}, seed=6)
    code, out, _ = kit(capsys, "compare", str(a), str(b))
    assert code == 0 and "docker " not in out  # nothing in common but native
    code, out, _ = kit(capsys, "compare", str(a), str(b), "--as", "docker@cut10=docker")
    assert code == 0
    (line,) = [x for x in out.splitlines() if x.strip().startswith("docker")]
    assert "changed by -" in line
    code, _, err = kit(capsys, "compare", str(a), str(b), "--as", "docker@cut10")
    assert code == 2 and err.startswith("kit: error: --as 'docker@cut10' must be ARM=NAME")


def test_two_arms_counted_as_one_name_or_one_arm_named_twice_is_refused(tmp_path, capsys):
    """--as a=x --as b=x pooled arms a and b of one side into one sample (only a=b with
    both present was refused); --as a=x --as a=y took the last silently."""
    arms = {"native": 1, "docker@a": 1, "docker@b": 0.9}
    a = campaign_folder(tmp_path / "a", "c1", 6, arms, seed=5)
    b = str(campaign_folder(tmp_path / "b", "c2", 6, arms, seed=6))
    code, _, err = kit(capsys, "compare", str(a), b, "--as", "docker@a=docker",
                       "--as", "docker@b=docker")  # fmt: skip
    assert code == 2 and err == (
        f"kit: error: --as docker@a=docker --as docker@b=docker: {a} has docker@a and docker@b; "
        "it would pool them\n"
    )
    code, _, err = kit(capsys, "compare", str(a), b, "--as", "docker@a=docker",
                       "--as", "docker@a=podman")  # fmt: skip
    assert code == 2 and err == (
        "kit: error: --as counts docker@a as docker and as podman; give it one name\n"
    )
    code, _, err = kit(capsys, "compare", str(a), b, "--as", "docker@a=docker@b")
    assert code == 2 and "--as docker@a=docker@b: " in err and "it would pool them" in err


def test_a_selection_key_given_twice_or_a_date_past_the_calendar_is_one_line(tmp_path, capsys):
    """host=a,host=b kept b alone; --until 9999-12-31 (its day's end) and a year-1 time
    east of UTC overflowed datetime: an OverflowError traceback."""
    db = tmp_path / "results.db"
    for sel, said in (
        ("host=nodeA,host=nodeB", "'host=nodeA,host=nodeB' gives host twice; a selection "
         "takes each key once (compare the two as A and B)"),
        ("until=9999-12-31", "--until '9999-12-31' is out of the calendar's range (years 1 "
         "to 9999, in UTC); give a date inside it, e.g. 2026-11-01"),
        ("since=0001-01-01T00:00+01:00", "--since '0001-01-01T00:00+01:00' is out of the "
         "calendar's range"),
    ):  # fmt: skip
        code, _, err = kit(capsys, "compare", sel, "host=nodeB", "--catalogue", str(db))
        assert code == 2 and err.startswith(f"kit: error: {said}") and err.count("\n") == 1
    code, _, err = kit(capsys, "history", "x", "--runtime", "docker", "--until", "9999-12-31",
                       "--catalogue", str(db))  # fmt: skip
    assert code == 2 and err.startswith("kit: error: --until '9999-12-31' is out of the ")


def test_selections_from_the_catalogue(tmp_path, capsys):
    db = tmp_path / "results.db"
    for i, host in enumerate(("nodeA", "nodeA", "nodeB")):
        factors = {"native": 1.0, "docker": 1.0 if host == "nodeA" else 0.9}
        catalogue.add(db, [campaign_folder(tmp_path / f"c{i}", f"c{i}", 6, factors, seed=i,
                                           host=host)])  # fmt: skip
    code, out, _ = kit(capsys, "compare", "host=nodeA", "host=nodeB", "--catalogue", str(db))
    assert code == 0
    assert out.startswith("A: host=nodeA (2 campaign(s))\nB: host=nodeB (1 campaign(s))\n")
    (line,) = [x for x in out.splitlines() if x.strip().startswith("docker")]
    assert "12/6" in line and "changed by -" in line
    code, _, err = kit(capsys, "compare", "host=nodeC", "host=nodeB", "--catalogue", str(db))
    assert code == 2 and err.startswith("kit: error: 'host=nodeC' selects no campaign of ")
    code, _, err = kit(capsys, "compare", "nodeA", "host=nodeB", "--catalogue", str(db))
    assert code == 2 and err.startswith(
        "kit: error: 'nodeA' is neither a results folder nor a selection KEY=VALUE"
    )


def test_check_max_overhead_exits_1_only_when_the_interval_is_wholly_beyond(tmp_path, capsys):
    d = campaign_folder(tmp_path / "d", "c1", 16, {"native": 1.0, "docker": 0.9}, seed=7)
    code, out, err = kit(capsys, "check", str(d), "--max-overhead", "docker=20%")
    assert (code, err) == (0, "") and out.startswith("within: docker overhead")
    with pytest.raises(SystemExit) as failed:
        kit(capsys, "check", str(d), "--max-overhead", "docker=2%")
    assert failed.value.code == 1
    assert capsys.readouterr().out.startswith("BEYOND: docker overhead")
    with pytest.raises(SystemExit) as undecided:  # never a pass: a CI tells it apart
        kit(capsys, "check", str(d), "--max-overhead", "docker=10%")
    assert undecided.value.code == EXIT_UNDECIDED == 3
    out, err = capsys.readouterr()
    assert out.startswith("cannot tell: docker overhead")
    assert err.startswith("kit: warning: cannot tell whether docker overhead")
    code, _, err = kit(capsys, "check", str(d), "--max-overhead", "podman=5%")
    assert code == 2 and "names podman, not an arm of" in err
    code, _, err = kit(capsys, "check", str(d), "--max-overhead", "docker=five")
    assert code == 2 and err.startswith("kit: error: --max-overhead docker 'five' must be a")
    code, _, err = kit(capsys, "check", str(d), "--max-overhead", "docker=2%,docker=20%")
    assert code == 2 and err == (  # the last bound silently won: within, exit 0
        "kit: error: --max-overhead 'docker=2%,docker=20%' bounds docker twice; give each arm "
        "once\n"
    )


def test_a_gate_that_would_check_nothing_is_refused_not_passed(tmp_path, capsys):
    """--max-overhead native=5% (the arm overheads are measured against), or a bound on a
    campaign without native: nothing was checked, an empty line printed, and exit 0."""
    d = campaign_folder(tmp_path / "d", "c1", 6, {"native": 1.0, "docker": 0.9}, seed=7)
    code, out, err = kit(capsys, "check", str(d), "--max-overhead", "native=5%")
    assert (code, out) == (2, "") and err == (
        "kit: error: --max-overhead bounds native, which every overhead is measured against; "
        "bound the other arms, e.g. docker=5%\n"
    )
    e = campaign_folder(tmp_path / "e", "c2", 6, {"docker": 1.0, "docker@b": 0.9}, seed=7)
    code, out, err = kit(capsys, "check", str(e), "--max-overhead", "docker@b=5%")
    assert (code, out) == (2, "") and err == (
        f"kit: error: --max-overhead: no arm it bounds was compared with native in {e} (arms: "
        "docker, docker@b); run native beside them\n"
    )


def test_check_against_a_selection_exits_by_where_the_change_lies(tmp_path, capsys):
    before = campaign_folder(tmp_path / "before", "c1", 16, ARMS, seed=8)
    same = campaign_folder(tmp_path / "same", "c2", 16, ARMS, seed=9)
    cut = campaign_folder(tmp_path / "cut", "c3", 16, {"native": 1.0, "docker": 0.8}, seed=10)
    code, out, _ = kit(capsys, "check", str(same), "--against", str(before), "--max-change", "15%")
    assert code == 0 and all(x.startswith("within") for x in out.splitlines())
    with pytest.raises(SystemExit) as failed:
        kit(capsys, "check", str(cut), "--against", str(before), "--max-change", "5%")
    assert failed.value.code == 1
    with pytest.raises(SystemExit) as undecided:
        kit(capsys, "check", str(same), "--against", str(before), "--max-change", "1%")
    out, err = capsys.readouterr()
    assert undecided.value.code == EXIT_UNDECIDED
    assert "cannot tell" in out and "kit: warning: cannot tell" in err
    code, _, err = kit(capsys, "check", str(same), "--against", str(before))
    assert code == 2 and err == "kit: error: --against SELECTION and --max-change PCT go together\n"


def test_history_names_what_changed_between_campaigns(tmp_path, capsys):
    db = tmp_path / "results.db"
    for i, version in enumerate(("docker 27.1", "docker 27.1", "docker 28.0")):
        d = campaign_folder(tmp_path / f"c{i}", f"c{i}", 5, {"native": 1, "docker": 0.95},
                            seed=i, started=f"2026-11-0{i + 1}T10:00:00+00:00",
                            runtime_version=version)  # fmt: skip
        catalogue.add(db, [d])
    svg, page = tmp_path / "history.svg", tmp_path / "history.html"
    code, out, err = kit(capsys, "history", "pytorch-mpich", "--runtime", "docker",
                         "--catalogue", str(db), "--figure", str(svg),
                         "--html", str(page))  # fmt: skip
    assert code == 0, err
    html = page.read_text()  # the same rows as a table, then the figure
    assert html.count("<tr>") == 4 and "docker 27.1 -&gt; docker 28.0</td>" in html
    assert '<figure id="history"><svg' in html or '<figure id="history"><?xml' in html
    rows = [x for x in out.splitlines() if x.strip().startswith("2026-")]
    assert [r.split()[1] for r in rows] == ["c0", "c1", "c2"]
    assert rows[1].endswith("-") and rows[2].endswith("runtime docker 27.1 -> docker 28.0")
    assert svg.read_text().lstrip().startswith("<")
    code, _, err = kit(capsys, "history", "pytorch-mpich", "--runtime", "podman",
                       "--catalogue", str(db))  # fmt: skip
    assert code == 2 and err.startswith("kit: error: no campaign in the catalogue compares")


def test_text_a_record_holds_is_printed_escaped_on_its_own_line(tmp_path, capsys):
    """A host name or a model from a trial record (a hand edit, another tool's line) holding
    a newline or a terminal's escape sequence: kit results ls, history and compare printed
    it as it was, a row of its own making in the table or a command to the terminal."""
    db = tmp_path / "results.db"
    host, model = "nodeB\nnodeC  fake row\x1b]0;owned\x07", "tiny\x1b[2J"
    folders = []
    for i, where in enumerate(("nodeA", host)):
        folders.append(campaign_folder(tmp_path / f"c{i}", f"c{i}", 5, ARMS, seed=i,
                                       started=f"2026-11-0{i + 1}T10:00:00+00:00",
                                       host=where, model=model))  # fmt: skip
        catalogue.add(db, folders)
    shown = {
        ("results", "ls"): "nodeB\\nnodeC  fake row\\x1b]0;owned\\x07",
        ("history", "pytorch-mpich", "--runtime", "docker"): "host nodeA -> nodeB\\nnodeC",
        ("compare", *map(str, folders)): "pytorch-mpich torch-cnn tiny\\x1b[2J, batch 32",
    }
    for args, escaped in shown.items():
        code, out, err = kit(capsys, *args, "--catalogue", str(db))
        assert code == 0, err
        assert escaped in out and not {"\x1b", "\x07"} & set(out), out
        assert not any(line.startswith("nodeC") for line in out.splitlines())


def test_kit_check_prints_an_arm_a_record_names_escaped(tmp_path, capsys):
    """kit check --against names each arm as the records do: one holding an escape
    sequence reached the terminal."""
    arms = {"native": 1.0, "docker\x1b[2J": 1.0}
    a, b = (campaign_folder(tmp_path / x, x, 5, arms, seed=i) for i, x in enumerate("ab"))
    code, out, err = kit(capsys, "check", str(b), "--against", str(a), "--max-change", "50%")
    assert code == 0, err
    assert out.count("docker\\x1b[2J ratio to native") == 1 and "\x1b" not in out + err


def test_export_writes_each_trial_as_mllog_lines(tmp_path, capsys):
    d = campaign_folder(tmp_path / "d", "c1", 2, ARMS)
    code, out, _ = kit(capsys, "export", str(d), "--format", "mllog")
    assert code == 0 and out.strip() == str(d / "mllog")
    files = sorted((d / "mllog").iterdir())
    assert len(files) == 4
    events = []
    for line in files[0].read_text().splitlines():
        assert line.startswith(mllog.PREFIX)
        events.append(json.loads(line[len(mllog.PREFIX) :]))
    assert all(
        list(e) == ["namespace", "time_ms", "event_type", "key", "value", "metadata"]
        for e in events
    )
    keys = [e["key"] for e in events]
    assert keys[0] == "submission_benchmark" and keys[-1] == "run_stop"
    assert keys.index("run_start") < keys.index("run_stop")
    assert events[-1]["metadata"]["status"] == "success"
    assert {"global_batch_size": 64}.items() <= {e["key"]: e["value"] for e in events}.items()
    code, _, err = kit(capsys, "export", str(d), "--format", "csv")
    assert code == 2 and err == "kit: error: --format 'csv' is not one of mllog\n"


def _as_command(folder: Path, argv: list[str], name: str = "rate", unit: str = "samples/s",
                higher: bool = True) -> Path:  # fmt: skip
    """A campaign_folder's trials as a user's command's (kit run --image --command)."""
    lines = []
    for line in (folder / store.FILE).read_text().splitlines():
        r = json.loads(line)
        declared = {"key": "value", "name": name, "unit": unit, "higher_is_better": higher}
        value = r["result"]["images_per_sec"]
        ran = {"argv": argv, "native_argv": ["./bench"]}
        r["result"] = {"schema": "kit.command/1", "bench": "command", "metric": declared,
                       "command": ran, "value": value if higher else 100 / value}  # fmt: skip
        r |= {"bench": "command", "model": "-", "batch_size": 0, "data": "-"}
        lines.append(json.dumps(r) + "\n")
    (folder / store.FILE).write_text("".join(lines))
    return folder


def test_campaigns_of_other_commands_or_figures_are_refused_naming_what_differs(tmp_path, capsys):
    """kit compare G2 H13b (other --command, other --unit) said "docker changed by
    +23.9 %"; kit compare G2 LB (LB a time, lower is better) called both a rate; kit
    check LB --against G2 said BEYOND; kit report G2 H13b pooled them in one table."""
    g2 = _as_command(campaign_folder(tmp_path / "g2", "g2", 6, ARMS, seed=1), ["./a"])
    h13b = _as_command(campaign_folder(tmp_path / "h13b", "h13b", 6, ARMS, seed=2), ["./b"])
    lb = _as_command(campaign_folder(tmp_path / "lb", "lb", 6, ARMS, seed=3), ["./a"],
                     name="seconds", unit="s", higher=False)  # fmt: skip
    code, out, err = kit(capsys, "compare", str(g2), str(h13b))
    assert (code, out) == (2, "") and "command './a | native: ./bench' in A, " in err
    code, out, err = kit(capsys, "compare", str(g2), str(lb))
    assert (code, out) == (2, "") and err.startswith(
        "kit: error: A and B measured different configurations (metric 'rate in samples/s, "
        "higher is better' in A, 'seconds in s, lower is better' in B)"
    )
    code, out, err = kit(capsys, "check", str(lb), "--against", str(g2), "--max-change", "5%")
    assert (code, out) == (2, "") and "different configurations (metric " in err
    a = summary.analyse([g2, h13b])  # kit report: two configurations, never one table
    assert sorted(g.key.command for g in a.groups) == [
        "./a | native: ./bench",
        "./b | native: ./bench",
    ]
    assert all(arm.n == 6 for g in a.groups for arm in g.arms)
    with pytest.raises(KitError) as two_ways:
        summary.analyse([g2, lb])
    assert str(two_ways.value).startswith(
        "'command' is measured as rate samples/s (higher is better) in some trials and as "
        "seconds s (lower is better) in others (campaign lb)"
    )


def test_a_campaign_compared_with_itself_is_refused_as_one_sample(tmp_path, capsys):
    """kit compare G2 G2 and kit check G2 --against G2 compared a campaign's trials with
    themselves as two independent samples, without a word."""
    g2 = str(campaign_folder(tmp_path / "g2", "g2", 6, ARMS, seed=1))
    code, out, err = kit(capsys, "compare", g2, g2)
    assert (code, out) == (2, "") and err == (
        f"kit: error: A ({g2}) and B ({g2}) hold the same trials (campaign g2): a campaign "
        "compared with itself is one sample, not two; compare it with other campaigns, or "
        "read its own report\n"
    )
    code, out, err = kit(capsys, "check", g2, "--against", g2, "--max-change", "5%")
    assert (code, out) == (2, "") and "hold the same trials (campaign g2)" in err


def test_as_naming_no_arm_or_a_malformed_mapping_is_refused(tmp_path, capsys):
    """--as nosuch=docker was ignored silently; --as docker=a=b made an arm named a=b."""
    a, b = (str(campaign_folder(tmp_path / x, x, 6, ARMS, seed=i)) for i, x in enumerate("ab"))
    code, _, err = kit(capsys, "compare", a, b, "--as", "nosuch=docker")
    assert code == 2 and err == (
        "kit: error: --as names nosuch, an arm of neither side (arms: docker, native); give "
        "--as an arm the campaigns ran\n"
    )
    code, _, err = kit(capsys, "compare", a, b, "--as", "docker=a=b")
    assert code == 2 and err.startswith("kit: error: --as 'docker=a=b' must be ARM=NAME")


def test_compare_refuses_a_campaign_json_the_report_refuses(tmp_path, capsys):
    """A campaign.json of "[" x 100000: check, report and results add refused it, compare
    read the folder."""
    a = campaign_folder(tmp_path / "a", "a", 6, ARMS, seed=1)
    b = campaign_folder(tmp_path / "b", "b", 6, ARMS, seed=2)
    (b / store.SPEC_FILE).write_text("[" * 100000)
    code, _, said = kit(capsys, "report", str(b))
    assert code == 2
    code, out, err = kit(capsys, "compare", str(a), str(b))
    assert (code, out, err) == (2, "", said)


def test_a_gate_short_of_rounds_cannot_tell_and_never_passes(tmp_path, capsys):
    """One round ("too few trials (need 3)") passed kit check with exit 0."""
    d = campaign_folder(tmp_path / "d", "c1", 1, {"native": 1.0, "docker": 0.9}, seed=7)
    with pytest.raises(SystemExit) as undecided:
        kit(capsys, "check", str(d), "--max-overhead", "docker=50%")
    out, _ = capsys.readouterr()
    assert undecided.value.code == EXIT_UNDECIDED and out.startswith("cannot tell: docker")


def test_a_negative_bound_is_named_not_taken_for_an_option(tmp_path, capsys):
    """--max-change -5% said "expected one argument", the value never named."""
    d = campaign_folder(tmp_path / "d", "c1", 3, ARMS, seed=7)
    code, _, err = kit(capsys, "check", str(d), "--against", str(d), "--max-change", "-5%")
    assert code == 2 and err.startswith("kit: error: --max-change '-5%' must be a percentage")


def test_export_replaces_a_link_in_its_folder_never_writes_through_it(tmp_path, capsys):
    """kit export G2 --out G2ml2, G2ml2/trial-00000-docker.log a link to another file:
    kit wrote through the link and replaced that file's contents."""
    d = campaign_folder(tmp_path / "d", "c1", 1, ARMS, seed=1)
    out = tmp_path / "out"
    out.mkdir()
    victim = tmp_path / "victim"
    victim.write_text("mine\n")
    (out / "trial-00001-docker.log").symlink_to(victim)
    code, _, err = kit(capsys, "export", str(d), "--out", str(out))
    assert (code, err) == (0, "") and victim.read_text() == "mine\n"
    link = out / "trial-00001-docker.log"
    assert not link.is_symlink() and link.read_text().startswith(":::MLLOG")


def test_a_records_text_is_one_line_escaped_in_every_format_surrogates_too(tmp_path, capsys):
    """A runtime_version "docker 1\\r\\nFAKE LINE" added a line to the report's Runtimes
    section; a --unit '<script>' landed raw in its Markdown heading; a record holding the
    valid JSON escape "vm\\udcff\\ud800" ended kit report, --format html and kit results
    add in a UnicodeEncodeError traceback."""
    d = _as_command(campaign_folder(tmp_path / "d", "c1", 3, ARMS, seed=1), ["./a"],
                    unit="samples/s | x | <script>")  # fmt: skip
    lines = (d / store.FILE).read_text().splitlines()
    version, host = '"runtime_version": "', '"hostname": "'
    fake = [x.replace(version, f"{version}docker 1\\r\\nFAKE LINE ")
            .replace(host, f"{host}vm\\udcff\\ud800") for x in lines]  # fmt: skip
    (d / store.FILE).write_text("\n".join(fake) + "\n")
    for fmt in ("md", "html", "csv", "json"):
        code, _, err = kit(capsys, "report", str(d), "--format", fmt)
        assert code == 0, err
        text = (d / f"report.{fmt}").read_text(encoding="utf-8")
        assert "\nFAKE LINE" not in text and ("<script>" not in text or fmt == "json")
        assert fmt not in ("md", "html") or "vm\ufffd\ufffd" in text  # the host's name
    md = (d / "report.md").read_text()
    assert "docker 1\\r\\nFAKE LINE" in md and "samples/s \\| x \\| &lt;script>" in md
    db = tmp_path / "results.db"
    code, _, err = kit(capsys, "results", "add", str(d), "--catalogue", str(db))
    assert (code, err) == (0, "")


def test_history_writes_the_format_its_suffix_names_and_names_a_full_disk(tmp_path, capsys):
    """kit history --figure out.png wrote SVG into the .png; /dev/full as --figure said
    "No space left on device", naming neither the option nor the file."""
    db = tmp_path / "results.db"
    for i in range(2):
        catalogue.add(db, [campaign_folder(tmp_path / f"c{i}", f"c{i}", 5, ARMS, seed=i)])
    base = ("history", "pytorch-mpich", "--runtime", "docker", "--catalogue", str(db))
    code, out, err = kit(capsys, *base, "--figure", str(tmp_path / "out.png"))
    assert (code, out) == (2, "") and err == (
        f"kit: error: --figure '{tmp_path / 'out.png'}': kit history writes SVG, not what "
        "'.png' names; give a FILE.svg\n"
    )
    assert not (tmp_path / "out.png").exists()
    code, out, err = kit(capsys, *base, "--html", "/dev/full")
    assert code == 2 and err == (
        "kit: error: cannot write --html '/dev/full': No space left on device; give a path "
        "with room, that you may write\n"
    )


def test_history_reads_each_campaigns_overheads_as_kept_and_computes_changed_ones(
    tmp_path, capsys, monkeypatch
):
    """kit history ran every campaign's whole analysis each time (10,000 campaigns: a
    minute); the catalogue keeps each one's overheads, computed again when its trials
    change, by another kit, or at another confidence."""
    from kit.across import history
    from kit.analysis import summary

    db = tmp_path / "results.db"
    days = ("2026-11-01T10:00:00+00:00", "2026-11-02T10:00:00+00:00")
    folders = [campaign_folder(tmp_path / f"c{i}", f"c{i}", 5, ARMS, seed=i, started=day)
               for i, day in enumerate(days)]  # fmt: skip
    code, _, _ = kit(capsys, "results", "add", *map(str, folders), "--catalogue", str(db))
    assert code == 0
    args = ("history", "pytorch-mpich", "--runtime", "docker", "--catalogue", str(db))
    first = kit(capsys, *args)
    real = summary.summarise
    counted = []
    monkeypatch.setattr(summary, "summarise", lambda *a: counted.append(a[1]) or real(*a))
    assert kit(capsys, *args) == first and counted == []  # read as kept
    more = campaign_folder(tmp_path / "more", "c1", 7, ARMS, seed=9,
                           started="2026-11-02T10:00:00+00:00")  # fmt: skip
    (folders[1] / store.FILE).write_text(
        (folders[1] / store.FILE).read_text() + (more / store.FILE).read_text()
    )
    catalogue.add(db, [folders[1]])  # c1's trials changed: its overheads are computed again
    code, out, _ = kit(capsys, *args)
    assert code == 0 and out != first[1] and counted == [str(folders[1].absolute())]
    monkeypatch.setattr(history, "__version__", "another")
    kit(capsys, *args)
    assert len(counted) == 3


def test_the_trials_kept_without_the_fit_are_the_ones_the_screen_keeps(tmp_path):
    """screen.kept skips the fit where no record shows outside load: the same trials."""
    from kit.analysis import screen

    d = campaign_folder(tmp_path / "d", "c1", 8, ARMS, seed=3)
    by_rt: dict = {}
    for t in compare.side(str(d), None).records:
        by_rt.setdefault(t.runtime, []).append(t)
    assert screen.kept(by_rt) == screen.screen(by_rt).kept == by_rt
    slowed = by_rt["docker"][2]
    loaded = dataclasses.replace(slowed, host_load={"other_cpu_pct": 60.0, "steal_cpu_pct": 0.0},
                                 result={**slowed.result, "images_per_sec": 20.0})  # fmt: skip
    by_rt["docker"][2] = loaded
    assert screen.kept(by_rt) == screen.screen(by_rt).kept
    assert loaded not in screen.kept(by_rt)["docker"]
