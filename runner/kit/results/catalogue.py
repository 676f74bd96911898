"""The results catalogue: every campaign's trials in one SQLite file, kept across campaigns.

A campaign's folder is an island; the catalogue is what `kit compare`, `kit check
--against` and `kit history` look across. It is SQLite through Python's standard library:
no server to run or to reach from a compute node, one file to back up, copy or share, and
transactions, so a campaign's new records land whole or not at all (a `kill -9` mid-insert
leaves the state before it) and two campaigns ending at once both land (the second waits
for the first's lock, up to BUSY_S). The journal is SQLite's rollback journal, not WAL: WAL
needs memory shared by every process that opens the file, which processes on different
nodes of a shared file system do not have (docs/results.md).

Nothing is stored twice: a campaign is keyed by a hash of its id and saved settings, a
trial by a hash of its record, so adding a folder again (or a copy of it, or after
--resume added trials) adds only what is new. A file at the path that is not a kit
catalogue (another program's, or a damaged one) is never written: one line says so.
"""

import contextlib
import hashlib
import json
import os
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from kit.core import paths, settings
from kit.core.errors import KitError
from kit.core.log import logger
from kit.core.schema import printable
from kit.results import record, runlock, store
from kit.results.record import Trial

APP_ID = 0x6B697463  # "kitc" in the file's header: a kit catalogue, not any SQLite file
HEADER = b"SQLite format 3\x00"
BUSY_S = 60.0  # how long a writer waits for another's transaction before giving up
ENV = "KIT_CATALOGUE"  # the catalogue kit run registers campaigns in; "off": none
OFF = "off"

# Each migration takes the schema from the version before it to its own, in one
# transaction with the row that records it.
MIGRATIONS = {
    1: """
    CREATE TABLE schema_version (version INTEGER PRIMARY KEY, applied TEXT NOT NULL);
    CREATE TABLE campaigns (
        id INTEGER PRIMARY KEY,
        key TEXT NOT NULL UNIQUE,  -- hash of the campaign id and its saved settings
        campaign TEXT NOT NULL,
        folder TEXT NOT NULL,  -- where it was last added from
        image TEXT NOT NULL,
        preset TEXT NOT NULL,  -- the preset whose leg it is, or ''
        settings TEXT NOT NULL,  -- its campaign.json, or {} where there is none
        started TEXT NOT NULL,  -- its first trial's start, UTC
        hosts TEXT NOT NULL,
        arms TEXT NOT NULL,  -- each arm with its runtime version
        trials INTEGER NOT NULL,
        ok INTEGER NOT NULL,
        added TEXT NOT NULL
    );
    CREATE TABLE trials (
        id INTEGER PRIMARY KEY,
        key TEXT NOT NULL UNIQUE,  -- hash of the record
        campaign_id INTEGER NOT NULL REFERENCES campaigns (id),
        runtime TEXT NOT NULL,
        runtime_version TEXT NOT NULL,
        host TEXT NOT NULL,
        started TEXT NOT NULL,
        ok INTEGER NOT NULL,  -- a measured trial that ended ok
        record TEXT NOT NULL
    );
    CREATE INDEX trials_campaign ON trials (campaign_id);
    CREATE INDEX trials_runtime ON trials (runtime, campaign_id);
    CREATE INDEX trials_host ON trials (host, campaign_id);
    CREATE INDEX campaigns_image ON campaigns (image, started);
    CREATE INDEX campaigns_started ON campaigns (started);
    """,
    2: """
    CREATE TABLE overheads (
        campaign_id INTEGER PRIMARY KEY REFERENCES campaigns (id),
        made TEXT NOT NULL,  -- the kit and confidence they were computed with
        points TEXT NOT NULL  -- JSON: each arm's ratio to native, as kit history shows it
    );
    """,
}
SCHEMA = max(MIGRATIONS)

log = logger(__name__)


def default_path() -> Path | None:
    """$KIT_CATALOGUE (a site's shared file), else $KIT_CACHE/results.db; None: "off"."""
    given = settings.value(ENV)
    if given == OFF:
        return None
    return Path(given) if given else paths.cache_dir() / "results.db"


def _not_ours(path: Path, why: str) -> KitError:
    return KitError(
        f"{path} is not a kit catalogue ({why}); kit results rebuild DIR... makes a new one "
        f"(it keeps the file as {path.name}.old-TIME), or give another --catalogue"
    )


def _check_header(path: Path) -> None:
    """Refuse a file that is not a kit catalogue from its first 100 bytes, before SQLite
    opens it (an empty or missing file is a catalogue not yet made). A folder, a pipe or a
    device is refused first: open() of a pipe nothing writes to waited for ever."""
    if path.exists() and not path.is_file():
        raise KitError(
            f"the catalogue {path} is not a file (a folder, a pipe or a device); give "
            "--catalogue the path of a file, or of none yet"
        )
    try:
        with open(path, "rb") as f:
            head = f.read(100)
    except FileNotFoundError:
        return
    except OSError as e:
        raise KitError(f"cannot read the catalogue {path}: {e.strerror}") from None
    if not head:
        return
    if len(head) < 100 or not head.startswith(HEADER):
        raise _not_ours(path, "not an SQLite file")
    if int.from_bytes(head[68:72], "big") != APP_ID:
        raise _not_ours(path, "an SQLite file of another program")


@contextlib.contextmanager
def _said(path: Path) -> Iterator[None]:
    """SQLite's failures as one line each, naming the file and the fix."""
    try:
        yield
    except sqlite3.OperationalError as e:
        text = str(e)
        if "locked" in text or "busy" in text:
            raise KitError(
                f"the catalogue {path} stayed locked by another kit for {BUSY_S:.0f} s; try again"
            ) from None
        if "readonly" in text:
            raise KitError(
                f"the catalogue {path} is read-only here; ask its owner to add"
            ) from None
        if "full" in text:
            raise KitError(
                f"the disk under the catalogue {path} is full (nothing was added); make room "
                "there, then kit results add the folders again"
            ) from None
        if text.startswith(("no such table", "no such column")):
            raise _not_ours(path, text) from None
        raise KitError(f"cannot use the catalogue {path}: {text}; check the path") from None
    except sqlite3.DatabaseError as e:
        raise _not_ours(path, str(e)) from None


@contextlib.contextmanager
def opened(path: Path, write: bool = False) -> Iterator[sqlite3.Connection]:
    """A connection to the catalogue at path, its schema current. To write, the file is
    made (with its folder) or migrated; to read, it must exist, and is opened read-only
    (mode=ro) where this user cannot write it, so a shared read-only file still answers."""
    _check_header(path)
    if write:
        paths.make_dir(path.parent, "--catalogue's folder")
        mode = "rwc"
    elif not path.is_file():
        raise KitError(
            f"no catalogue at {path}; kit results add DIR... registers campaigns (kit run "
            "registers each one as it ends)"
        )
    else:
        writable = os.access(path, os.W_OK) and os.access(path.parent, os.W_OK | os.X_OK)
        mode = "rw" if writable else "ro"
    with _said(path):
        db = sqlite3.connect(
            f"{path.absolute().as_uri()}?mode={mode}",
            uri=True,
            timeout=BUSY_S,
            isolation_level=None,  # transactions are begun and ended here, explicitly
        )
        try:
            _current(db, path, write)
            yield db
        finally:
            db.close()


def _current(db: sqlite3.Connection, path: Path, write: bool) -> None:
    """Bring the schema to SCHEMA (a writer, inside one transaction, so two kits making a
    new catalogue at once make it once), or refuse one a reader cannot use."""
    version = _version(db, path)
    if version == SCHEMA:
        return
    if version > SCHEMA:
        raise KitError(
            f"the catalogue {path} is schema {version}, newer than this kit's; upgrade kit"
        )
    if not write:
        raise KitError(f"the catalogue {path} is schema {version}; kit results add migrates it")
    with transaction(db):
        version = _version(db, path)  # another kit may have migrated it meanwhile
        if version == 0:
            db.execute(f"PRAGMA application_id = {APP_ID}")
        for v in range(version + 1, SCHEMA + 1):
            for statement in MIGRATIONS[v].split(";"):
                if statement.strip():
                    db.execute(statement)
            db.execute("INSERT INTO schema_version VALUES (?, ?)", (v, _now()))


def _version(db: sqlite3.Connection, path: Path) -> int:
    """The schema's version (0: an empty file), or a refusal of a foreign database."""
    tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    if not tables:
        return 0
    if db.execute("PRAGMA application_id").fetchone()[0] != APP_ID or (
        "schema_version" not in tables
    ):
        raise _not_ours(path, "an SQLite file of another program")
    return db.execute("SELECT max(version) FROM schema_version").fetchone()[0] or 0


@contextlib.contextmanager
def transaction(db: sqlite3.Connection) -> Iterator[None]:
    """All or nothing, holding the write lock from the start (BEGIN IMMEDIATE): a second
    writer waits for it rather than failing halfway."""
    db.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        if db.in_transaction:  # a full disk has SQLite roll it back itself: a second
            db.execute("ROLLBACK")  # ROLLBACK's error hid that cause
        raise
    db.execute("COMMIT")


def utc_text(when: datetime) -> str:
    """A time as the catalogue keeps it: UTC text that sorts as time does (a time without
    a zone taken as UTC)."""
    when = when.replace(tzinfo=UTC) if when.tzinfo is None else when.astimezone(UTC)
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


def _now() -> str:
    return utc_text(datetime.now(UTC))


def _utc(t: Trial) -> str:
    """A record's start as catalogue time ('' where it does not say)."""
    when = record.started(t)
    return "" if when is None else utc_text(when)


def _hash(value: object) -> str:
    return digest(json.dumps(value, sort_keys=True))


def digest(text: str) -> str:
    """A stored text's key (a trial's: its line as stored, serialised once for both; a
    reader that finds a row's text still hashing to its key knows it as it was added)."""
    return hashlib.sha256(text.encode()).hexdigest()


def folders(given: list[Path]) -> list[Path]:
    """The campaign folders the given ones hold: a campaign's own, or a preset's legs;
    a KitError naming the first that is neither, before anything is written."""
    out = []
    for d in given:
        if store.has_trials(d):
            out.append(d)
        elif d.is_dir() and store.saved_preset(d):
            out += sorted(x for x in d.iterdir() if store.has_trials(x))
        else:
            raise KitError(f"'{d}' holds no trials ({store.FILE}); pass a kit run --out folder")
    return out


@dataclass(frozen=True)
class Added:
    folder: Path
    campaigns: int
    new: int  # trials not in the catalogue before
    skipped: list[str]  # the trials file's lines that could not be read


def add(path: Path, given: list[Path]) -> list[Added]:
    """Register the campaigns of the given folders, in one transaction, holding the
    catalogue's lock (a rebuild's, meanwhile, would have dropped what was added)."""
    todo = finished(folders(given))
    with exclusive(path):
        return _add(path, todo)


def _add(path: Path, todo: list[Path]) -> list[Added]:
    with opened(path, write=True) as db, transaction(db):
        return [_add_folder(db, d) for d in todo]


def finished(todo: list[Path]) -> list[Path]:
    """The folders, or a KitError naming the first a kit run still writes (its lock held
    by another process): a snapshot of some of its trials would be filed as the campaign."""
    for d in todo:
        if who := runlock.writer(d, others=True):
            raise KitError(
                f"'{d}' is still being written by a kit run ({who}); it registers itself "
                "when it ends, or kit results add it then"
            )
    return todo


LOCK_WAIT_S = BUSY_S  # how long add or rebuild waits for another's hold on the catalogue


@contextlib.contextmanager
def exclusive(path: Path, wait: float | None = None) -> Iterator[None]:
    """The catalogue to this process alone, add or rebuild, for as long as it takes: a
    flock on a file beside it (SQLite's own locks end with a transaction, and a rebuild
    spans several: it reads the old file, makes a new one and puts it in place); a
    KitError after `wait` seconds (None: LOCK_WAIT_S)."""
    paths.make_dir(path.parent, "--catalogue's folder")
    beside = path.with_name(f".{path.name}.lock")
    held = contextlib.ExitStack()
    try:  # the lock's own failure, not one of what is done holding it
        held.enter_context(
            paths.exclusive(beside, f"the catalogue {path}", LOCK_WAIT_S if wait is None else wait)
        )
    except OSError as e:
        raise KitError(
            f"cannot lock the catalogue {path} ({beside}: {e.strerror}); give --catalogue "
            "a file in a folder you may write"
        ) from None
    with held:
        yield


def _preset_of(folder: Path) -> str:
    """The preset whose leg the folder is ('' for a campaign of its own)."""
    with contextlib.suppress(KitError):
        return (store.saved_preset(folder.parent) or {}).get("name", "")
    return ""


def _add_folder(db: sqlite3.Connection, folder: Path) -> Added:
    """A folder's campaigns and trials; a trial is stored as its line holds it (a newer
    kit's keys kept), keyed by the line's hash: the same whichever kit adds it."""
    lines, problems = store.lines(folder / store.FILE)
    spec = store.settings(folder)
    by_id: dict[str, list[tuple[dict, Trial]]] = {}
    for line in lines:
        t = Trial.from_json(line)
        by_id.setdefault(t.campaign, []).append((line, t))
    new = 0
    for cid, rs in by_id.items():
        settings = spec if spec.get("campaign") == cid else {}
        key = _hash({"campaign": cid, "settings": settings})
        if not settings and (known := _known(db, cid)):  # its trials copied without its
            key = known  # campaign.json: the campaign already filed, not a second, empty one
        db.execute(
            "INSERT INTO campaigns (key, campaign, folder, image, preset, settings, started,"
            " hosts, arms, trials, ok, added) VALUES (?, ?, ?, ?, ?, ?, '', '', '', 0, 0, ?)"
            " ON CONFLICT (key) DO UPDATE SET folder = excluded.folder",
            (key, cid, str(folder.absolute()), rs[0][1].image, _preset_of(folder),
             json.dumps(settings, sort_keys=True), _now()),
        )  # fmt: skip
        (row,) = db.execute("SELECT id FROM campaigns WHERE key = ?", (key,)).fetchone()
        before = db.total_changes
        db.executemany(
            "INSERT OR IGNORE INTO trials (key, campaign_id, runtime, runtime_version, host,"
            " started, ok, record) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            [
                (digest(text), row, t.runtime, t.runtime_version, _host(t), _utc(t),
                 t.status == "ok" and not t.warmup, text)
                for text, t in ((json.dumps(line, sort_keys=True), t) for line, t in rs)
            ],
        )  # fmt: skip
        if added := db.total_changes - before:  # kit history computes it again
            db.execute("DELETE FROM overheads WHERE campaign_id = ?", (row,))
        new += added
        _summarise(db, row)
    return Added(folder, len(by_id), new, problems)


def remember(path: Path, made: str, points: dict[int, str]) -> None:
    """Keep what kit history computed of each campaign (its row id: the points as JSON),
    so that the next reads it instead of each campaign's analysis (10,000 campaigns took
    a minute); where the catalogue cannot be written here, nothing is kept, and nothing
    is said: history answered all the same."""
    with (
        contextlib.suppress(KitError),
        exclusive(path, 0),
        opened(path, write=True) as db,
        transaction(db),
    ):
        db.executemany(
            "INSERT OR REPLACE INTO overheads (campaign_id, made, points) SELECT ?, ?, ?"
            " WHERE EXISTS (SELECT 1 FROM campaigns WHERE id = ?)",
            [(row, made, text, row) for row, text in points.items()],
        )


def _known(db: sqlite3.Connection, cid: str) -> str | None:
    """The key of the campaign cid first filed (None: none is)."""
    row = db.execute(
        "SELECT key FROM campaigns WHERE campaign = ? ORDER BY id LIMIT 1", (cid,)
    ).fetchone()
    return row[0] if row else None


def _summarise(db: sqlite3.Connection, row: int) -> None:
    """The campaign's columns ls shows and filters on, from all its trials now stored."""
    started, trials, ok = db.execute(
        "SELECT min(nullif(started, '')), count(*), sum(ok) FROM trials WHERE campaign_id = ?",
        (row,),
    ).fetchone()
    hosts = db.execute(
        "SELECT DISTINCT host FROM trials WHERE campaign_id = ? ORDER BY host", (row,)
    ).fetchall()
    arms = db.execute(
        "SELECT runtime, max(runtime_version) FROM trials WHERE campaign_id = ?"
        " GROUP BY runtime ORDER BY runtime != 'native', runtime",
        (row,),
    ).fetchall()
    db.execute(
        "UPDATE campaigns SET started = ?, hosts = ?, arms = ?, trials = ?, ok = ? WHERE id = ?",
        (
            started or "",
            ", ".join(h for (h,) in hosts),
            ", ".join(f"{a} ({v})" for a, v in arms),
            trials,
            ok or 0,
            row,
        ),
    )


def _host(t: Trial) -> str:
    return str(t.host.get("hostname", "?"))


def left_out(row: str, why: str) -> None:
    """Name on stderr a catalogue row edited since it was added (SQLite keeps a value of
    any type in any column), which is left out: the one message of kit results ls,
    compare, history and rebuild for it, with the way back (the folders read again)."""
    log.warning(
        f"kit: warning: the catalogue's {row}: {why} (left out; kit results rebuild DIR... "
        "reads the folders again)"
    )


def rebuild(path: Path, given: list[Path]) -> tuple[list[Added], Path | None]:
    """A new catalogue from the given folders (none: those the catalogue at path names;
    a campaign whose folder cannot be read again is kept as it was stored, and named),
    made beside it and put in its place, the catalogue's lock held throughout; the file
    that was there is kept, renamed (with its journal, which SQLite would otherwise play
    back into the new file). Refused, as add is, where this user may not write it."""
    if path.is_file() and not os.access(path, os.W_OK):
        raise KitError(f"the catalogue {path} is read-only here; ask its owner to rebuild it")
    if not os.access(path.parent, os.W_OK | os.X_OK) and path.parent.is_dir():
        raise KitError(
            f"cannot write in {path.parent}, where rebuild makes the new catalogue beside "
            "the old; give --catalogue a file in a folder you may write"
        )
    with exclusive(path):
        return _rebuild(path, given)


def _rebuild(path: Path, given: list[Path]) -> tuple[list[Added], Path | None]:
    kept: list[int] = []  # campaigns (rows of the old file) whose folder is gone
    if not given:
        try:
            with opened(path) as db:
                named = db.execute("SELECT id, folder FROM campaigns ORDER BY id").fetchall()
        except KitError as e:
            raise KitError(f"{e}; name the results folders: kit results rebuild DIR...") from None
        for row, folder in named:
            if not isinstance(folder, str):  # a row edited to hold a blob: no folder's name
                left_out(f"campaign {row}", "its folder is not text")
            elif not store.has_trials(Path(folder)):
                kept.append(row)
        texts = dict.fromkeys(Path(f) for _, f in named if isinstance(f, str))
        given = [d for d in texts if store.has_trials(d)]
    todo = finished(folders(given))
    made = path.with_name(f".{path.name}.{os.getpid()}.rebuild")
    for leftover in (made, made.with_name(made.name + "-journal")):
        leftover.unlink(missing_ok=True)
    try:
        added = _add(made, todo)
        if kept:
            _keep(path, made, kept)
        old = None
        if path.exists():
            old = path.with_name(f"{path.name}.old-{datetime.now(UTC):%Y%m%d-%H%M%S}")
            path.rename(old)
            journal = path.with_name(path.name + "-journal")
            if journal.exists():
                journal.rename(old.with_name(old.name + "-journal"))
        made.rename(path)
    finally:
        made.unlink(missing_ok=True)
    return added, old


def _keep(path: Path, made: Path, rows: list[int]) -> None:
    """Copy the old catalogue's campaigns (rows) whose folders are gone into the new one,
    as they were stored, each named on stderr: a rebuild never drops a campaign unseen."""
    with opened(made, write=True) as db:
        db.execute("ATTACH DATABASE ? AS old", (f"{path.absolute().as_uri()}?mode=ro",))
        with transaction(db):
            _copy(db, rows)


def _copy(db: sqlite3.Connection, rows: list[int]) -> None:
    """The old catalogue's rows (attached as old) and their trials, into this one."""
    for row in rows:
        campaign, folder, n = db.execute(
            "SELECT campaign, folder, trials FROM old.campaigns WHERE id = ?", (row,)
        ).fetchone()
        db.execute(
            "INSERT OR IGNORE INTO campaigns (key, campaign, folder, image, preset,"
            " settings, started, hosts, arms, trials, ok, added) SELECT key, campaign,"
            " folder, image, preset, settings, started, hosts, arms, trials, ok, added"
            " FROM old.campaigns WHERE id = ?",
            (row,),
        )
        db.execute(
            "INSERT OR IGNORE INTO trials (key, campaign_id, runtime, runtime_version, host,"
            " started, ok, record) SELECT t.key, c.id, t.runtime, t.runtime_version, t.host,"
            " t.started, t.ok, t.record FROM old.trials t JOIN old.campaigns o"
            " ON o.id = t.campaign_id JOIN campaigns c ON c.key = o.key WHERE o.id = ?",
            (row,),
        )
        log.warning(
            f"kit: warning: campaign {printable(str(campaign))}'s folder "
            f"{printable(str(folder))} cannot be read again; its {n} trial(s) are kept "
            "as the catalogue held them"
        )
