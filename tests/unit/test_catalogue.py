"""The results catalogue: a real SQLite file in tmp_path, written by real processes."""

import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from kit import cli
from kit.core.errors import KitError
from kit.results import catalogue, selection, store
from kit.results.record import Trial
from kit.run import campaign
from tests.unit.records import campaign_folder
from tests.unit.run.test_campaign_run import Scripted, run

from .pipes import unblocked

RUNNER = str(Path(__file__).resolve().parents[2] / "runner")


def kit(capsys, *args: str) -> tuple[int, str, str]:
    code = cli.main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def trials_in(db_path: Path) -> int:
    with sqlite3.connect(db_path) as db:
        return db.execute("SELECT count(*) FROM trials").fetchone()[0]


def test_adding_again_or_a_copy_stores_nothing_twice_and_a_resume_adds_what_is_new(tmp_path):
    db = tmp_path / "results.db"
    a = campaign_folder(tmp_path / "a", "c1", 5, {"native": 1.0, "docker": 0.9})
    (added,) = catalogue.add(db, [a])
    assert (added.campaigns, added.new) == (1, 10)
    copy = tmp_path / "copy"
    copy.mkdir()
    for name in (store.FILE, store.SPEC_FILE):
        (copy / name).write_bytes((a / name).read_bytes())
    assert [x.new for x in catalogue.add(db, [a, copy])] == [0, 0]
    more = campaign_folder(tmp_path / "more", "c1", 7, {"native": 1.0, "docker": 0.9})
    (a / store.FILE).write_bytes((more / store.FILE).read_bytes())  # --resume ran 2 rounds
    (more / store.SPEC_FILE).write_bytes((a / store.SPEC_FILE).read_bytes())
    assert catalogue.add(db, [a])[0].new == 4
    listed, records = selection.select(db, selection.Selection())
    assert len(listed) == 1 and len(records) == 14 == trials_in(db)
    assert listed[0].folder == str(a.absolute()) and listed[0].ok == 14
    # each trial is stored as its line holds it (no field the line lacks made null, a newer
    # kit's kept): its hash is the line's, whichever kit added it; it reads back typed
    line = json.loads((a / store.FILE).read_text().splitlines()[0])
    with contextlib.closing(sqlite3.connect(db)) as c:
        (stored,) = c.execute("SELECT record FROM trials ORDER BY id LIMIT 1").fetchone()
    assert json.loads(stored) == line and records[0] == Trial.from_json(line)


def test_ls_filters_by_image_runtime_version_host_dates_and_preset(tmp_path, capsys):
    db = tmp_path / "results.db"
    campaign_folder(tmp_path / "p" / "leg", "c1", 3, {"native": 1, "docker@cut": 0.9})
    (tmp_path / "p" / store.PRESET_FILE).write_text(json.dumps({"name": "overhead"}))
    campaign_folder(
        tmp_path / "b", "c2", 3, {"native": 1, "singularity": 1}, host="nodeB",
        started="2026-11-20T10:00:00+00:00", runtime_version="apptainer 1.3.4",
    )  # fmt: skip
    assert kit(capsys, "results", "add", str(tmp_path / "p"), str(tmp_path / "b"),
               "--catalogue", str(db))[0] == 0  # fmt: skip

    def ids(*filters: str) -> list[str]:
        code, out, err = kit(capsys, "results", "ls", "--json", "--catalogue", str(db), *filters)
        assert code == 0, err
        return [c["campaign"] for c in json.loads(out)]

    assert ids() == ["c1", "c2"]
    assert ids("--runtime", "docker") == ["c1"]  # an arm docker@LABEL is docker's
    assert ids("--runtime", "docker@cut") == ["c1"]
    assert ids("--runtime-version", "1.3.4") == ["c2"]
    assert ids("--host", "nodeB") == ["c2"]
    assert ids("--since", "2026-11-10") == ["c2"]
    assert ids("--until", "2026-11-01") == ["c1"]  # a date: to the end of that day
    assert ids("--preset", "overhead") == ["c1"]
    assert ids("--image", "pytorch-mpich", "--host", "nodeA") == ["c1"]
    code, out, err = kit(capsys, "results", "ls", "--catalogue", str(db))
    assert out.splitlines()[0].split()[:3] == ["CAMPAIGN", "STARTED", "IMAGE"]
    code, _, err = kit(capsys, "results", "ls", "--since", "last week", "--catalogue", str(db))
    assert code == 2 and err.count("\n") == 1
    assert err.startswith("kit: error: --since 'last week' is not a date or time; give e.g. ")


# A writer that says (touching argv[3]) when it is about to take the catalogue's lock.
ADD = textwrap.dedent(
    """
    import contextlib, sys
    from kit.results import catalogue
    from pathlib import Path
    real = catalogue.exclusive
    @contextlib.contextmanager
    def announced(path):
        Path(sys.argv[3]).touch()
        with real(path):
            yield
    catalogue.exclusive = announced
    catalogue.add(Path(sys.argv[1]), [Path(sys.argv[2])])
    """
)


def test_two_campaigns_ending_at_once_both_land(tmp_path):
    db = tmp_path / "results.db"
    a = campaign_folder(tmp_path / "a", "c1", 20, {"native": 1, "docker": 0.9}, seed=1)
    b = campaign_folder(tmp_path / "b", "c2", 20, {"native": 1, "docker": 0.9}, seed=2)
    catalogue.add(db, [])  # made, so that the test can hold its lock
    env = {**os.environ, "PYTHONPATH": RUNNER}
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # both writers start while the file is locked
    starts = [tmp_path / "a-begins", tmp_path / "b-begins"]
    writers = [
        subprocess.Popen([sys.executable, "-c", ADD, str(db), str(d), str(s)], env=env)
        for d, s in zip((a, b), starts, strict=True)
    ]
    # Both writers begin while the file is locked, however slowly the host starts them
    # (the first then waits in SQLite's busy wait, the second for the first's flock); the
    # short wait after only lets them reach those waits.
    deadline = time.monotonic() + 120
    while not all(s.exists() for s in starts):
        assert time.monotonic() < deadline, "a writer never began"
        assert all(w.poll() is None for w in writers), "a writer ended before it began"
        time.sleep(0.02)
    time.sleep(0.5)
    holder.execute("COMMIT")
    holder.close()
    assert [w.wait(timeout=60) for w in writers] == [0, 0]
    listed, records = selection.select(db, selection.Selection())
    assert sorted(c.campaign for c in listed) == ["c1", "c2"] and len(records) == 80


KILLED = textwrap.dedent(
    """
    import os, signal, sys
    from pathlib import Path
    from kit.results import catalogue
    def die(db, row):  # after the trials' rows were inserted, before the commit
        os.kill(os.getpid(), signal.SIGKILL)
    catalogue._summarise = die
    catalogue.add(Path(sys.argv[1]), [Path(sys.argv[2])])
    """
)


def test_a_kill_9_during_an_insert_leaves_the_state_before_it(tmp_path):
    db = tmp_path / "results.db"
    a = campaign_folder(tmp_path / "a", "c1", 4, {"native": 1, "docker": 0.9})
    b = campaign_folder(tmp_path / "b", "c2", 30, {"native": 1, "docker": 0.9})
    catalogue.add(db, [a])
    env = {**os.environ, "PYTHONPATH": RUNNER}
    child = subprocess.run([sys.executable, "-c", KILLED, str(db), str(b)], env=env)
    assert child.returncode == -signal.SIGKILL
    listed, records = selection.select(db, selection.Selection())
    assert [c.campaign for c in listed] == ["c1"] and len(records) == 8
    assert catalogue.add(db, [b])[0].new == 60  # and the next add lands whole


@pytest.mark.parametrize("kind", ["bytes", "sqlite", "damaged"])
def test_a_file_that_is_not_a_kit_catalogue_is_one_line_and_never_written(tmp_path, capsys, kind):
    db = tmp_path / "results.db"
    a = campaign_folder(tmp_path / "a", "c1", 3, {"native": 1, "docker": 0.9})
    if kind == "bytes":
        db.write_bytes(b"my notes, not a database\n" * 20)
    elif kind == "sqlite":
        with sqlite3.connect(db) as other:
            other.execute("CREATE TABLE jobs (id INTEGER)")
    else:
        catalogue.add(db, [a])
        data = bytearray(db.read_bytes())
        data[100:4096] = b"\xff" * (4096 - 100)  # the schema's page, overwritten
        db.write_bytes(bytes(data))
    before = db.read_bytes()
    for args in (["results", "ls"], ["results", "add", str(a)], ["compare", "host=x", str(a)]):
        code, out, err = kit(capsys, *args, "--catalogue", str(db))
        assert code == 2 and not out
        assert err.startswith(f"kit: error: {db} is not a kit catalogue (")
        assert "kit results rebuild" in err and err.count("\n") == 1
    assert db.read_bytes() == before
    code, out, _ = kit(capsys, "results", "rebuild", str(a), "--catalogue", str(db))
    assert code == 0
    (kept,) = tmp_path.glob("results.db.old-*")
    assert kept.read_bytes() == before  # moved aside, never overwritten
    assert [c.campaign for c in selection.select(db, selection.Selection())[0]] == ["c1"]


@pytest.mark.parametrize("kind", ["pipe", "folder"])
def test_a_catalogue_path_that_is_no_file_is_one_line_never_a_hang(tmp_path, capsys, kind):
    """--catalogue (or KIT_CATALOGUE) naming a pipe: open() waited for a writer for ever,
    kit run's registering at a campaign's end too."""
    db = tmp_path / "results.db"
    if kind == "pipe":
        unblocked(db)
    else:
        db.mkdir()
    a = campaign_folder(tmp_path / "a", "c1", 3, {"native": 1, "docker": 0.9})
    for args in (["results", "ls"], ["results", "add", str(a)], ["compare", "host=x", str(a)]):
        code, out, err = kit(capsys, *args, "--catalogue", str(db))
        assert (code, out) == (2, "") and err == (
            f"kit: error: the catalogue {db} is not a file (a folder, a pipe or a device); give "
            "--catalogue the path of a file, or of none yet\n"
        )


def test_a_read_only_catalogue_answers_ls_and_compare(tmp_path, capsys, monkeypatch):
    db = tmp_path / "results.db"
    a = campaign_folder(tmp_path / "a", "c1", 6, {"native": 1, "docker": 0.9}, host="n1")
    b = campaign_folder(tmp_path / "b", "c2", 6, {"native": 1, "docker": 0.9}, host="n2")
    catalogue.add(db, [a, b])
    db.chmod(0o444)
    real = os.access
    monkeypatch.setattr(  # as a user who may not write it (the tests may run as root)
        catalogue.os, "access", lambda p, mode, **kw: not mode & os.W_OK and real(p, mode)
    )
    with catalogue.opened(db) as conn, pytest.raises(sqlite3.OperationalError, match="readonly"):
        conn.execute("DELETE FROM trials")  # opened mode=ro
    code, out, _ = kit(capsys, "results", "ls", "--catalogue", str(db))
    assert code == 0 and "c1" in out and "c2" in out
    code, out, err = kit(capsys, "compare", "host=n1", "host=n2", "--catalogue", str(db))
    assert code == 0, err
    assert "no change larger than" in out


def test_a_row_edited_in_the_catalogue_is_named_and_left_out(tmp_path, capsys):
    db = tmp_path / "results.db"
    a = campaign_folder(tmp_path / "a", "c1", 6, {"native": 1, "docker": 0.9}, host="n1")
    b = campaign_folder(tmp_path / "b", "c2", 6, {"native": 1, "docker": 0.9}, host="n2")
    catalogue.add(db, [a, b])
    with contextlib.closing(sqlite3.connect(db)) as c, c:
        ids = [i for (i,) in c.execute("SELECT id FROM trials ORDER BY id LIMIT 3")]
        (text,) = c.execute("SELECT record FROM trials WHERE id = ?", (ids[0],)).fetchone()
        record = json.loads(text)
        del record["host"], record["status"]
        for row, edited in zip(ids, (json.dumps(record), "{not json", "x"), strict=True):
            c.execute("UPDATE trials SET record = ? WHERE id = ?", (edited, row))
    _, records = selection.select(db, selection.Selection(host="n1"))
    err = capsys.readouterr().err
    assert len(records) == 9 and err.count("kit: warning: the catalogue's trial ") == 3
    assert f"trial {ids[0]}: " in err and f"trial {ids[1]}: not a JSON line" in err
    code, out, err = kit(capsys, "compare", "host=n1", "host=n2", "--catalogue", str(db))
    assert code == 0 and "Traceback" not in err and "no change larger than" in out, err


def test_a_campaign_row_edited_to_hold_a_blob_is_named_and_left_out(tmp_path, capsys):
    """SQLite keeps a blob in a text column: ls (and --json) and rebuild were TypeError
    tracebacks on a campaign row so edited."""
    db = tmp_path / "results.db"
    a = campaign_folder(tmp_path / "a", "c1", 3, {"native": 1, "docker": 0.9})
    b = campaign_folder(tmp_path / "b", "c2", 3, {"native": 1, "docker": 0.9})
    catalogue.add(db, [a, b])
    with contextlib.closing(sqlite3.connect(db)) as c, c:
        c.execute("UPDATE campaigns SET image = X'FF00', folder = X'2F' WHERE campaign = 'c1'")
    said = (
        "kit: warning: the catalogue's campaign 1: its image is not text (left out; kit "
        "results rebuild DIR... reads the folders again)\n"
    )
    for json_ in ([], ["--json"]):
        code, out, err = kit(capsys, "results", "ls", *json_, "--catalogue", str(db))
        assert (code, err) == (0, said) and "c2" in out and "c1" not in out
    code, out, err = kit(capsys, "results", "rebuild", "--catalogue", str(db))
    assert code == 0 and err == said.replace("image", "folder")  # one message, one owner
    assert [c.campaign for c in selection.select(db, selection.Selection())[0]] == ["c2"]


def test_a_start_past_the_calendar_in_utc_is_added_as_unknown(tmp_path, capsys):
    """A hand-edited start of year 1 east of UTC has no UTC time: kit results add was an
    OverflowError traceback; it is added as one that does not say when it ran."""
    db = tmp_path / "results.db"
    a = campaign_folder(tmp_path / "a", "c1", 3, {"native": 1}, started="0001-01-01T00:00+01:00")
    code, _, err = kit(capsys, "results", "add", str(a), "--catalogue", str(db))
    assert (code, err) == (0, "")
    (listed,) = selection.select(db, selection.Selection())[0]
    assert listed.started == ""


def test_no_catalogue_yet_and_a_newer_schema_are_one_line(tmp_path, capsys):
    db = tmp_path / "results.db"
    code, _, err = kit(capsys, "results", "ls", "--catalogue", str(db))
    assert code == 2 and err.startswith(f"kit: error: no catalogue at {db}; kit results add")
    assert not db.exists()
    catalogue.add(db, [])
    with sqlite3.connect(db) as conn:
        conn.execute("INSERT INTO schema_version VALUES (99, 'later')")
    with pytest.raises(KitError, match="schema 99, newer than this kit's"):
        catalogue.add(db, [])


def test_a_campaign_registers_as_it_ends_and_a_failure_is_one_warning(
    tmp_path, capsys, monkeypatch
):
    a = campaign_folder(tmp_path / "a", "c1", 3, {"native": 1, "docker": 0.9})
    db = tmp_path / "cat" / "results.db"
    monkeypatch.setenv(catalogue.ENV, str(db))
    campaign.register(a)
    assert [c.campaign for c in selection.select(db, selection.Selection())[0]] == ["c1"]
    bad = tmp_path / "bad.db"
    bad.write_text("not a catalogue")
    monkeypatch.setenv(catalogue.ENV, str(bad))
    campaign.register(a)  # never raises: the campaign has ended as it did
    err = capsys.readouterr().err
    assert err.startswith(f"kit: warning: campaign not registered in the catalogue {bad}: ")
    assert err.count("\n") == 1 and f"kit results add {a}" in err
    assert bad.read_text() == "not a catalogue"
    monkeypatch.setenv(catalogue.ENV, catalogue.OFF)
    assert catalogue.default_path() is None


def test_kit_runs_campaign_registers_when_it_ends_and_when_it_is_interrupted(tmp_path, monkeypatch):
    for name, ends, trials in (("done", {}, 8), ("stopped", {2: "interrupted"}, 3)):
        db = tmp_path / f"{name}.db"
        monkeypatch.setenv(catalogue.ENV, str(db))
        with pytest.raises(KeyboardInterrupt) if ends else contextlib.nullcontext():
            run(tmp_path / name, Scripted(ends))
        (listed,) = selection.select(db, selection.Selection())[0]
        assert (listed.folder, listed.trials) == (str(tmp_path / name), trials)


def test_a_folder_without_trials_is_refused_before_anything_is_written(tmp_path, capsys):
    db = tmp_path / "results.db"
    code, _, err = kit(capsys, "results", "add", str(tmp_path / "nope"), "--catalogue", str(db))
    assert code == 2
    said = f"'{tmp_path / 'nope'}' holds no trials (trials.jsonl); pass a kit run --out folder"
    assert err == f"kit: error: {said}\n"
    assert not db.exists()


def test_rebuild_keeps_and_names_a_campaign_whose_folder_is_gone(tmp_path, capsys):
    """kit results add ... del1 del2 G, rm -rf del1, kit results rebuild: exit 0, and
    del1's campaign was in the old file only."""
    db = tmp_path / "results.db"
    gone = campaign_folder(tmp_path / "del1", "c1", 3, {"native": 1, "docker": 0.9}, seed=1)
    kept = campaign_folder(tmp_path / "del2", "c2", 3, {"native": 1, "docker": 0.9}, seed=2)
    catalogue.add(db, [gone, kept])
    for f in gone.iterdir():
        f.unlink()
    gone.rmdir()
    code, _, err = kit(capsys, "results", "rebuild", "--catalogue", str(db))
    assert code == 0 and err == (
        f"kit: warning: campaign c1's folder {gone} cannot be read again; its 6 trial(s) are "
        "kept as the catalogue held them\n"
    )
    listed, records = selection.select(db, selection.Selection())
    assert sorted((c.campaign, c.trials) for c in listed) == [("c1", 6), ("c2", 6)]
    assert len(records) == 12


def test_add_and_rebuild_each_wait_for_the_others_hold_on_the_catalogue(tmp_path, monkeypatch):
    """A rebuild while an add ran: the add said "6 new trial(s)", and the rebuilt file held
    neither campaign. Each holds the catalogue's lock for all it does."""
    db = tmp_path / "results.db"
    a = campaign_folder(tmp_path / "a", "c1", 3, {"native": 1, "docker": 0.9})
    catalogue.add(db, [a])
    monkeypatch.setattr(catalogue, "LOCK_WAIT_S", 0.0)
    with catalogue.exclusive(db):  # another kit's add or rebuild, mid-way
        for act in (lambda: catalogue.add(db, [a]), lambda: catalogue.rebuild(db, [])):
            with pytest.raises(KitError, match="stayed locked by another kit for 0 s"):
                act()
    assert catalogue.rebuild(db, [])[0][0].new == 6


def test_rebuild_is_refused_where_add_is_and_names_no_file_of_its_own(
    tmp_path, capsys, monkeypatch
):
    """A catalogue file another user owns (its folder writable): rebuild replaced it,
    though add was refused; in a read-only folder it named its internal temporary."""
    db = tmp_path / "cat" / "results.db"
    a = campaign_folder(tmp_path / "a", "c1", 3, {"native": 1, "docker": 0.9})
    catalogue.add(db, [a])
    real = os.access
    for unwritable, said in (
        (db, f"the catalogue {db} is read-only here; ask its owner to rebuild it"),
        (db.parent, f"cannot write in {db.parent}, where rebuild makes the new catalogue "
         "beside the old; give --catalogue a file in a folder you may write"),
    ):  # fmt: skip
        monkeypatch.setattr(  # as a user who may not write it (the tests may run as root)
            catalogue.os, "access", lambda p, mode, u=unwritable: p != u and real(p, mode)
        )
        code, _, err = kit(capsys, "results", "rebuild", str(a), "--catalogue", str(db))
        assert (code, err) == (2, f"kit: error: {said}\n")
    assert sorted(p.name for p in db.parent.iterdir()) == [".results.db.lock", "results.db"]


HOLD = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from kit.results import runlock
    with runlock.held(Path(sys.argv[1])):
        Path(sys.argv[2]).touch()
        sys.stdin.read()
    """
)


def test_a_folder_a_kit_run_still_writes_is_refused(tmp_path, capsys):
    """kit results add of a folder kit run --out still wrote filed a 2-of-4 snapshot as
    the campaign, with no note. (kit run's own registering, from the process holding the
    lock, is not refused: test_kit_runs_campaign_registers_when_it_ends...)"""
    db = tmp_path / "results.db"
    a = campaign_folder(tmp_path / "a", "c1", 3, {"native": 1, "docker": 0.9})
    began = tmp_path / "began"
    env = {**os.environ, "PYTHONPATH": RUNNER}
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(a), str(began)], env=env, stdin=subprocess.PIPE
    )
    try:
        deadline = time.monotonic() + 120
        while not began.exists():
            assert time.monotonic() < deadline and holder.poll() is None, "no lock taken"
            time.sleep(0.02)
        code, _, err = kit(capsys, "results", "add", str(a), "--catalogue", str(db))
        assert code == 2 and err.startswith(
            f"kit: error: '{a}' is still being written by a kit run (pid {holder.pid} on "
        )
        assert err.endswith("; it registers itself when it ends, or kit results add it then\n")
    finally:
        holder.communicate(b"", timeout=60)
    code, _, err = kit(capsys, "results", "add", str(a), "--catalogue", str(db))
    assert (code, err) == (0, "")


def test_trials_copied_without_campaign_json_join_their_campaign_not_a_ghost(tmp_path, capsys):
    """A folder without campaign.json, its trials already filed: a second row with no
    start time and 0/0 trials."""
    db = tmp_path / "results.db"
    a = campaign_folder(tmp_path / "a", "c1", 3, {"native": 1, "docker": 0.9})
    copy = tmp_path / "copy"
    copy.mkdir()
    (copy / store.FILE).write_text((a / store.FILE).read_text())
    catalogue.add(db, [a, copy])
    (listed,) = selection.select(db, selection.Selection())[0]
    assert (listed.campaign, listed.trials, listed.folder) == ("c1", 6, str(copy))


def test_a_full_disk_or_a_renamed_table_is_named_as_what_it_is(tmp_path, capsys, monkeypatch):
    """A full disk said "cannot rollback - no transaction is active; check the path"; a
    catalogue whose table was renamed said "no such table: trials; check the path"."""
    db = tmp_path / "results.db"
    a = campaign_folder(tmp_path / "a", "c1", 20, {"native": 1, "docker": 0.9})
    catalogue.add(db, [])
    real = sqlite3.connect

    def full(*args, **kwargs) -> sqlite3.Connection:  # SQLite's own SQLITE_FULL, at once
        conn = real(*args, **kwargs)
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
        conn.execute(f"PRAGMA max_page_count = {pages}")
        return conn

    monkeypatch.setattr(catalogue.sqlite3, "connect", full)
    code, _, err = kit(capsys, "results", "add", str(a), "--catalogue", str(db))
    assert (code, err) == (2, (
        f"kit: error: the disk under the catalogue {db} is full (nothing was added); make "
        "room there, then kit results add the folders again\n"
    ))  # fmt: skip
    monkeypatch.setattr(catalogue.sqlite3, "connect", real)
    with contextlib.closing(real(db)) as conn, conn:
        conn.execute("ALTER TABLE trials RENAME TO gone")
    code, _, err = kit(capsys, "results", "add", str(a), "--catalogue", str(db))
    assert code == 2 and err.startswith(
        f"kit: error: {db} is not a kit catalogue (no such table: trials); kit results rebuild"
    )


def test_a_lock_another_user_made_beside_a_shared_catalogue_is_held_read_only(
    tmp_path, monkeypatch
):
    """A site's shared catalogue: the first user's .results.db.lock, not writable by the
    next, must not refuse the next user's add."""
    db = tmp_path / "results.db"
    lock_file = tmp_path / ".results.db.lock"
    lock_file.touch()
    lock_file.chmod(0o444)
    real = os.open

    def opened(path, flags, *mode):  # as another user would find it (tests may run as root)
        if path == lock_file and flags & os.O_RDWR:
            raise PermissionError(13, "Permission denied", str(path))
        return real(path, flags, *mode)

    monkeypatch.setattr(catalogue.os, "open", opened)
    a = campaign_folder(tmp_path / "a", "c1", 3, {"native": 1, "docker": 0.9})
    assert catalogue.add(db, [a])[0].new == 6
