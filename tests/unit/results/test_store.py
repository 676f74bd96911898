"""The results store never loses a finished record: torn writes, bad lines, bad folders."""

import json
import os
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kit.analysis import summary
from kit.core.errors import KitError
from kit.results import runlock, store

from ..pipes import unblocked
from ..records import record, typed

SPEC = {"image": "pytorch-mpich", "runtimes": ["native"], "repeats": 6, "seed": 0}


def lines_of(path):
    return path.read_bytes().split(b"\n")


def test_truncated_at_every_offset_then_resumed_keeps_every_finished_record(tmp_path):
    """A writer killed at any byte of a campaign's file, then --resume: every record that
    was whole before the cut survives unchanged, and the rest run again, once."""
    src = tmp_path / "src"
    cid, _ = store.open_campaign(src, SPEC, resume=False)
    full = [record("native", 100.0 + i, campaign=cid, index=i) for i in range(3)]  # ~1,400 cuts
    as_read = typed(full)
    for r in full:
        store.append(src, r)
    data = (src / store.FILE).read_bytes()
    spec_text = (src / store.SPEC_FILE).read_text()
    ends = [i + 1 for i, b in enumerate(data) if b == ord("\n")]
    for cut in range(len(data) + 1):
        out = tmp_path / f"cut{cut}"
        out.mkdir()
        (out / store.SPEC_FILE).write_text(spec_text)
        (out / store.FILE).write_bytes(data[:cut])
        _, done = store.open_campaign(out, SPEC, resume=True)
        whole = sum(1 for end in ends if end - 1 <= cut)  # its JSON complete, newline or not
        assert done == set(range(whole)), cut
        for r in full:
            if r["index"] not in done:
                store.append(out, r)
        after = (out / store.FILE).read_bytes()
        assert after.startswith(data[:cut]), cut  # nothing before the cut was rewritten
        got = store.read(out / store.FILE).records
        assert sorted(t.index for t in got) == list(range(3)), cut
        assert all(t == as_read[t.index] for t in got), cut


def test_bad_lines_are_named_skipped_and_counted(tmp_path):
    path = tmp_path / store.FILE
    good = json.dumps(record("native", 5.0)).encode()
    path.write_bytes(
        b"\n".join(
            [good, b"[1, 2]", b'{"schema": "kit.trial/1"}', b"\xff\xfe", good, b"not json", b""]
        )
    )
    got = store.read(path)
    assert len(got.records) == 2
    assert got.problems == [
        f"{path}:2: a JSON list, not a trial record",
        f"{path}:3: field 'campaign' is missing or not a str",
        f"{path}:4: not UTF-8 text",
        f"{path}:6: not a JSON line",
    ]
    ok_without_result = record("native", 5.0) | {"result": {"images_per_sec": "fast"}}
    assert store.shape_problem(ok_without_result) == (
        "result field 'images_per_sec' is missing or of the wrong type"
    )


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("startup_s", "1.5"),
        ("compile_s", [1]),
        ("loss", 5),
        ("loss", [0.5, "x"]),
        ("step_times_s", [0.1, "x"]),
        ("peak_rss_mb", [True]),
        ("framework_version", 5),
        ("hosts", "n1"),
    ],
)
@pytest.mark.parametrize("bench", ["torch-cnn", "cmd"])
def test_a_field_the_analysis_reads_of_the_wrong_type_is_a_named_line(
    tmp_path, capsys, field, value, bench
):
    """Fields the analysis reads where a record holds them (a user's command's has none of
    them; compile_s only a compiled run's) were not checked: a list of loss holding "x", a
    start-up of "1.5" in a command's result were tracebacks in kit report."""
    declared = {"key": "value", "name": "rate", "unit": "", "higher_is_better": True}
    for i in range(6):
        for j, arm in enumerate(("native", "docker")):
            r = record(arm, 100.0 + i + j, index=2 * i + j, repeat=i)
            if bench == "cmd":
                r |= {"bench": "cmd", "model": "-"}
                r["result"] = {"schema": "kit.command/1", "bench": "cmd", "metric": declared,
                               "value": 100.0 + i + j}  # fmt: skip
            r["result"] |= {field: value} if i == 5 and j == 1 else {}
            store.append(tmp_path, r)
    a = summary.analyse([tmp_path])
    required = bench != "cmd" and field in ("startup_s", "framework_version")  # said before
    said = "is missing or of the wrong type" if required else "is of the wrong type"
    why = f"{tmp_path / store.FILE}:12: result field '{field}' {said}"
    assert (a.ok, a.skipped) == (11, [why])
    assert capsys.readouterr().err == f"kit: warning: {why} (skipped)\n"
    from kit.report import writers

    assert "## " in writers.render(a, "md")  # the report of the rest, no traceback


def test_report_header_counts_skipped_lines(tmp_path):
    for i in range(6):
        store.append(tmp_path, record("native", 100.0 + i, index=i))
    with open(tmp_path / store.FILE, "ab") as f:
        f.write(b'{"torn": \n')
    from kit.analysis import summary
    from kit.report import writers

    text = writers.render(summary.analyse([tmp_path]), "md")
    assert "1 unreadable lines skipped." in text.splitlines()[2]


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        (lambda d: d.write_text("x"), r"--out '.*' is a file; choose a directory"),
        (
            lambda d: (d / store.FILE).mkdir(parents=True),
            r"trials.jsonl' is a folder, not a regular file; move it away or choose another --out",
        ),
    ],
)
def test_unwritable_store_is_refused_before_any_trial(tmp_path, setup, message):
    out = tmp_path / "out"
    setup(out)
    with pytest.raises(KitError, match=message):
        store.open_campaign(out, SPEC, resume=False)


def test_corrupt_campaign_file_is_one_line(tmp_path):
    store.open_campaign(tmp_path, SPEC, resume=False)
    (tmp_path / store.SPEC_FILE).write_text("{not json")
    with pytest.raises(KitError, match=r"campaign.json cannot be read as a campaign"):
        store.open_campaign(tmp_path, SPEC, resume=True)
    (tmp_path / store.SPEC_FILE).write_text("[]")
    with pytest.raises(KitError, match=r"holds no campaign id"):
        store.open_campaign(tmp_path, SPEC, resume=True)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.binary(max_size=40), st.sampled_from([b"{}", b"null", b"[{}]"]))))
def test_any_bytes_give_records_or_named_problems(tmp_path_factory, chunks):
    path = tmp_path_factory.mktemp("h") / store.FILE
    good = json.dumps(record("native", 1.0)).encode()
    path.write_bytes(b"\n".join([good, *chunks]))
    got = store.read(path)
    assert got.records[:1] == typed([json.loads(good)])
    assert all(p.startswith(f"{path}:") for p in got.problems)


HOLD = """import sys, time
from pathlib import Path
from kit.results import runlock
with runlock.held(Path(sys.argv[1])):
    print("held", flush=True)
    time.sleep(600)  # killed by the test; it must not let go first, however slow the host
"""


def test_one_run_per_folder_and_a_dead_holders_lock_is_taken_over(tmp_path, capsys):
    """A second `kit run` on a folder in use is refused naming the holder, before it
    writes anything; a lock left by a killed run is taken over with a line saying so."""
    out = tmp_path / "run"
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(out)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout.readline() == "held\n"
        done = subprocess.run(
            [sys.executable, "-m", "kit.cli", "run", "pytorch-mpich", "--runtime", "native",
             "--out", str(out)],
            capture_output=True, text=True,
        )  # fmt: skip
        assert done.returncode == 2, done.stderr
        assert done.stderr.startswith(
            f"kit: error: {out} is in use by another kit run (pid {holder.pid} on "
        )
        assert not (out / store.SPEC_FILE).exists()
    finally:
        holder.kill()  # as SIGKILL does: no clean-up, the note stays
        holder.wait()
    with runlock.held(out):
        note = (out / runlock.LOCK_FILE).read_text()
        assert note.startswith(f"pid {os.getpid()} on ")
    err = capsys.readouterr().err
    assert err.startswith(f"kit: taking over {out} from a kit run that is no longer running (pid")
    assert f"pid {holder.pid} on " in err
    assert (out / runlock.LOCK_FILE).read_text() == ""  # a clean end leaves no note
    with runlock.held(out):
        pass
    assert capsys.readouterr().err == ""


def test_the_dry_run_sees_a_holder_without_taking_the_lock(tmp_path):
    """check_out (the dry run's) refuses a folder another run holds, as held() does, with
    the same line, and takes nothing; a dead holder's note alone does not count."""
    out = tmp_path / "run"
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(out)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout.readline() == "held\n"
        with pytest.raises(KitError) as dry:
            runlock.check_out(out)
        with pytest.raises(KitError) as real, runlock.held(out):
            pass
        assert str(dry.value) == str(real.value)
        assert str(dry.value).startswith(f"{out} is in use by another kit run (pid {holder.pid}")
    finally:
        holder.kill()
        holder.wait()
    assert (out / runlock.LOCK_FILE).read_text().startswith(f"pid {holder.pid} on ")
    runlock.check_out(out)  # the note is left, the lock went with its holder


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        (lambda d: d.write_text("x"), "--out '{d}' is a file; choose a directory"),
        (lambda d: (d / store.FILE).mkdir(parents=True), "'{d}/trials.jsonl' is a folder, not"),
        (lambda d: d.parent.joinpath("f").write_text(""), None),  # makeable: no error
    ],
)
def test_the_dry_run_refuses_an_unusable_folder_as_the_run_does_making_nothing(
    tmp_path, setup, message
):
    out = tmp_path / "out"
    setup(out)
    before = sorted(tmp_path.rglob("*"))
    if message is None:
        runlock.check_out(out)
    else:
        with pytest.raises(KitError) as dry:
            runlock.check_out(out)
        with pytest.raises(KitError) as real:
            store.writable(out)
        assert str(dry.value) == str(real.value)
        assert str(dry.value).startswith(message.format(d=out))
    assert sorted(tmp_path.rglob("*")) == before


@pytest.mark.parametrize(
    ("make", "kind"),
    [
        (unblocked, "a named pipe"),
        (lambda p: p.mkdir(), "a folder"),
        (lambda p: p.symlink_to(p.parent.parent / "elsewhere"), "a symbolic link (to {e})"),
    ],
)
def test_a_lock_path_that_is_no_regular_file_is_one_line_never_a_hang(tmp_path, make, kind):
    """open() of a named pipe at .kit-run.lock waited for a writer for ever (kit run
    --dry-run hung), a folder there was an IsADirectoryError traceback in the dry run: the
    run and its dry run refuse each with the same line."""
    out = tmp_path / "out"
    out.mkdir()
    make(out / runlock.LOCK_FILE)
    said = (
        f"'{out / runlock.LOCK_FILE}' is {kind.format(e=tmp_path / 'elsewhere')}, not a regular "
        "file; move it away or choose another --out"
    )
    with pytest.raises(KitError) as dry:
        runlock.check_out(out)
    with pytest.raises(KitError) as real, runlock.held(out):
        pass
    assert str(dry.value) == str(real.value) == said


def test_a_report_reads_each_trial_once(tmp_path, capsys):
    """The same trials in two folders (a copy) or twice in one file count once."""
    a, b = tmp_path / "a", tmp_path / "b"
    for i in range(6):
        for rt, rate in (("native", 100.0), ("docker", 99.0)):
            store.append(a, record(rt, rate + i % 3, repeat=i, index=2 * i + (rt == "docker")))
    b.mkdir()
    (b / store.FILE).write_bytes((a / store.FILE).read_bytes() * 2)
    once = summary.analyse([a])
    twice = summary.analyse([a, b])
    assert [arm.n for arm in twice.groups[0].arms] == [arm.n for arm in once.groups[0].arms]
    assert twice.trials == once.trials == 12
    assert twice.skipped == [f"{b / store.FILE}: 24 record(s) identical to ones already read"]
    assert "24 record(s) identical to ones already read (skipped)" in capsys.readouterr().err


FULL = """import json, resource, signal, sys
from pathlib import Path
from kit.results import store
out = Path(sys.argv[1])
store.append(out, json.loads(sys.argv[2]))
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # over the limit: EFBIG, as a full disk ENOSPC
size = (out / store.FILE).stat().st_size
resource.setrlimit(resource.RLIMIT_FSIZE, (size + 100, resource.RLIM_INFINITY))
store.append(out, json.loads(sys.argv[2]))
"""


def test_a_record_the_disk_cannot_hold_is_cut_back_off_and_printed(tmp_path):
    """The file may hold 100 more bytes, the record needs more: the part written is
    taken back (the file stays whole records), the record goes to stderr, one line says
    how to go on."""
    r = record("native", 100.0, campaign="c", index=0)
    done = subprocess.run(
        [sys.executable, "-c", FULL, str(tmp_path), json.dumps(r)], capture_output=True, text=True
    )
    lines = done.stderr.splitlines()
    assert done.returncode == 1 and "Traceback" in done.stderr  # raised, not caught here
    assert lines[0] == f"kit: the unwritten record follows: {json.dumps(r, sort_keys=True)}"
    assert lines[-1] == (
        f"kit.core.errors.KitError: cannot write a record to '{tmp_path / store.FILE}': File "
        f"too large; the records before it are kept: make room, then continue with kit run "
        f"... --out {tmp_path} --resume"
    )
    assert (tmp_path / store.FILE).read_text() == json.dumps(r, sort_keys=True) + "\n"


@pytest.mark.parametrize(
    ("name", "want"), [(store.FILE, "a regular file"), (store.LOGS, "a folder")]
)
def test_a_link_in_a_results_folder_is_refused_never_written_through(tmp_path, capsys, name, want):
    """A copied or shared folder whose trials.jsonl or logs/ is a link to a file or folder
    elsewhere: kit run appended its records to that file and kept its logs there. The run,
    its dry run and an append refuse it with one line (the record printed, never lost);
    kit report still reads the folder."""
    out, elsewhere = tmp_path / "out", tmp_path / "elsewhere"
    out.mkdir()
    if name == store.FILE:
        elsewhere.write_text(json.dumps(record("native", 1.0)) + "\n")
    else:
        elsewhere.mkdir()
    (out / name).symlink_to(elsewhere)
    before = sorted(tmp_path.rglob("*"))
    said = (
        f"'{out / name}' is a symbolic link (to {elsewhere}), not {want}; move it away or "
        "choose another --out"
    )
    r = record("native", 2.0, index=1)
    for write in (
        lambda: runlock.check_out(out),
        lambda: runlock.held(out).__enter__(),
        lambda: store.open_campaign(out, SPEC, resume=False),
        lambda: store.append(out, r),
    ):
        with pytest.raises(KitError) as e:
            write()
        assert str(e.value) == said
    assert sorted(tmp_path.rglob("*")) == before
    if name == store.FILE:
        assert elsewhere.read_text() == json.dumps(record("native", 1.0)) + "\n"
        assert len(store.load(out).records) == 1  # read through the link, as before
    unwritten = f"kit: the unwritten record follows: {json.dumps(r, sort_keys=True)}\n"
    assert capsys.readouterr().err == unwritten


def test_a_log_linked_elsewhere_is_not_written_through(tmp_path, capsys):
    """The whole output of a trial that did not end ok goes to logs/NAME.log: a link there
    had kit overwrite the file it names. It is said, and the record goes on without it."""
    out, elsewhere = tmp_path / "out", tmp_path / "elsewhere"
    (out / store.LOGS).mkdir(parents=True)
    elsewhere.write_text("kept\n")
    log = out / store.LOGS / "trial-1.log"
    log.symlink_to(elsewhere)
    assert store.save_log(out, "trial-1", "output") == ""
    assert elsewhere.read_text() == "kept\n"
    assert capsys.readouterr().err == (
        f"kit: warning: cannot keep the output in {log}: '{log}' is a symbolic link (to "
        f"{elsewhere}), not a regular file\n"
    )
    assert store.save_log(out, "trial-2", "output") == "logs/trial-2.log"


def test_a_record_holding_nan_or_an_infinity_is_filed_with_the_fields_named_never_as_nan(
    tmp_path,
):
    """Python's json writes NaN and Infinity, which are not JSON: such a record is filed
    failed with null there and the fields named, and the campaign goes on."""
    r = record("native", 5.0, index=1)
    r["result"]["loss"] = [0.5, float("nan")]
    r["host_load"] = {"other_cpu_pct": float("-inf")}
    filed = store.append(tmp_path, r)
    assert (filed["status"], filed["result"]["loss"]) == ("failed", [0.5, None])
    assert filed["cause"] == (
        "not a JSON number (filed as null): result.loss[1], host_load.other_cpu_pct"
    )
    text = (tmp_path / store.FILE).read_text()
    assert "NaN" not in text and "Infinity" not in text
    assert json.loads(text) == filed
    timeout = record("native", 0.0, status="timeout", index=2, cause="t") | {"result": None}
    timeout["wall_s"] = float("inf")
    assert store.append(tmp_path, timeout)["status"] == "timeout"  # not ok: kept as it ended
    assert store.read(tmp_path / store.FILE).problems == []


@pytest.mark.parametrize("token", ["NaN", "Infinity", "-Infinity", "1e999", "1" + "0" * 400])
def test_a_hand_edited_nan_or_infinity_is_one_warning_naming_file_and_line(tmp_path, capsys, token):
    """json.loads reads NaN, Infinity and 1e999 (as an infinity): the store does not; nor an
    int no float holds (its median was an OverflowError in kit report)."""
    path = tmp_path / store.FILE
    for i in range(4):
        store.append(tmp_path, record("native", 5.0 + i, index=i))
    lines = path.read_text().splitlines()
    lines[2] = lines[2].replace('"images_per_sec": 7.0', f'"images_per_sec": {token}')
    path.write_text("\n".join(lines) + "\n")
    a = summary.analyse([tmp_path])
    why = f"{path}:3: field 'result.images_per_sec' holds NaN or an infinity, not a JSON number"
    assert (a.ok, a.skipped) == (3, [why])
    assert capsys.readouterr().err == f"kit: warning: {why} (skipped)\n"
