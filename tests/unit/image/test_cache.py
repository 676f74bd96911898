"""The bounded image cache: `kit cache ls` and `prune` on a fake cache tree (sparse
products, stamps set by os.utime, the engine's image list injected), the in-use mark a
running kit holds, sizes and ages typed by users."""

import contextlib
import fcntl
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kit.core import units
from kit.core.errors import KitError
from kit.image import cache, marks

NOW = 2_000_000_000.0
DAY = 86400.0
GB = 1_000_000_000


def digest(key: str) -> str:
    return "sha256:" + key * 64


def make(root: Path, name: str, key: str, days_ago: float, **gb: float) -> Path:
    """An image folder as kit leaves it: manifest, products (sparse: image.EXT of gb[EXT]
    GB), last-used stamp."""
    folder = root / "images" / name / (key * 16)
    folder.mkdir(parents=True)
    tag = f"kit/{name}:1.0.0-cpu"
    (folder / "manifest.json").write_text(json.dumps({"digest": digest(key), "tag": tag}))
    for ext, size in gb.items():
        with open(folder / f"image.{ext}", "wb") as f:
            f.truncate(int(size * GB))
    stamp = folder / marks.LAST_USED
    stamp.touch()
    os.utime(stamp, (NOW - days_ago * DAY, NOW - days_ago * DAY))
    return folder


@pytest.fixture
def tree(tmp_path, monkeypatch) -> dict[str, Path]:
    """Four folders: a (oldest, 10 GB), b (4 GB), c (1.5 GB, with a GPU copy), d (newest,
    3 GB): 18.5 GB in all."""
    monkeypatch.setenv("KIT_CACHE", str(tmp_path))
    folders = {
        "a": make(tmp_path, "pytorch-mpich", "a", 40, sif=2, sqfs=2, tar=6),
        "b": make(tmp_path, "pytorch-mpich", "b", 20, sif=2, sqfs=2),
        "c": make(tmp_path, "tf-openmpi", "c", 10, sqfs=1),
        "d": make(tmp_path, "foreign-0123456789abcdef", "d", 1, tar=3),
    }
    gpu = folders["c"] / "nvidia-535.104"
    gpu.mkdir()
    with open(gpu / "libcuda.so", "wb") as f:
        f.truncate(GB // 2)
    return folders


def user(folder: Path) -> subprocess.Popen:
    """Another kit using folder (a campaign): it says 'held' once marked, ends on EOF."""
    code = (
        "import sys; from pathlib import Path; from kit.image import marks\n"
        "marks.use(Path(sys.argv[1])); print('held', flush=True); sys.stdin.read()"
    )
    return subprocess.Popen(
        [sys.executable, "-c", code, str(folder)], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )


@contextlib.contextmanager
def held_by_a_child(folder: Path) -> Iterator[None]:
    """A running kit (another process) using folder: its mark held until it ends."""
    child = user(folder)
    try:
        assert child.stdout.readline() == b"held\n"
        yield
    finally:
        child.stdin.close()
        child.wait(timeout=30)


def waiting_on_a_flock(child: subprocess.Popen, within_s: float = 60.0) -> None:
    """Return once child waits on a flock (a "->" line of /proc/locks names its pid): the
    state the test sets up, reached however slowly the host starts the child."""
    deadline = time.monotonic() + within_s
    while not any(
        line.split()[1] == "->" and line.split()[5] == str(child.pid)
        for line in Path("/proc/locks").read_text().splitlines()
    ):
        assert child.poll() is None, "the child ended instead of waiting"
        assert time.monotonic() < deadline, "the child never waited on the mark"
        time.sleep(0.02)


def names(said: str) -> list[str]:
    """The folders prune said it removed (or would), in its order, by their key."""
    removed = [line for line in said.splitlines() if line.startswith(("removed ", "would remove "))]
    paths = [next(w for w in line.split() if w.startswith("/")) for line in removed]
    return [path.rstrip(":").rsplit("/", 1)[1][0] for path in paths]


def test_ls_shows_each_folder_least_recently_used_first(tree):
    text = cache.listing({digest("a"), digest("d")}).splitlines()
    assert text[0].split() == [
        "LAST", "USED", "SIZE", "IN", "USE", "ENGINE", "DIGEST", "IMAGE", "PRODUCTS",
    ]  # fmt: skip
    rows = [line.split("  ") for line in text[1:5]]
    assert [[c.strip() for c in row if c.strip()][2:] for row in rows] == [
        ["-", "yes", "sha256:aaaaaaaaaaaa", "kit/pytorch-mpich:1.0.0-cpu",
         "sif 2.00 GB, squashfs 2.00 GB, tar 6.00 GB"],
        ["-", "gone", "sha256:bbbbbbbbbbbb", "kit/pytorch-mpich:1.0.0-cpu",
         "sif 2.00 GB, squashfs 2.00 GB"],
        ["-", "gone", "sha256:cccccccccccc", "kit/tf-openmpi:1.0.0-cpu",
         "squashfs 1.00 GB, nvidia-535.104 500.0 MB"],
        ["-", "yes", "sha256:dddddddddddd", "kit/foreign-0123456789abcdef:1.0.0-cpu",
         "tar 3.00 GB"],
    ]  # fmt: skip
    assert text[5] == f"4 image folders, 18.50 GB, in {cache.images_dir()}"


def test_ls_json_says_in_use_and_that_no_engine_answered(tree):
    with held_by_a_child(tree["b"]):
        got = json.loads(cache.listing_json(None))
    assert (got["engine_answers"], got["size_bytes"] // GB) == (False, 18)
    b = next(f for f in got["folders"] if f["digest"] == digest("b"))
    assert (b["in_use"], b["in_engine"], b["products"]) == (
        True, None, {"sif": 2 * GB, "squashfs": 2 * GB},
    )  # fmt: skip
    assert abs((tree["b"] / marks.LAST_USED).stat().st_mtime - time.time()) < 60  # stamped
    assert b["path"] == str(tree["b"])


def test_prune_removes_least_recently_used_first_until_the_size_holds(tree):
    said = cache.prune(cache.Rules.of(None, None, "6G"), dry_run=False, now=NOW)
    assert names(said) == ["a", "b"]  # 18.5 GB -> 4.5 GB: the two oldest go, in that order
    assert said.splitlines()[-1] == "freed 14.00 GB; the cache's images hold 4.50 GB in 2 folders"
    assert not tree["a"].exists() and not tree["b"].exists()
    assert tree["c"].is_dir() and tree["d"].is_dir()


@pytest.mark.parametrize(
    ("rules", "gone"),
    [
        ((3, None, None), ["a"]),
        ((0, None, None), ["a", "b", "c", "d"]),
        ((None, "15d", None), ["a", "b"]),
        ((3, "30d", "20G"), ["a"]),
        ((None, "50d", "20G"), []),
    ],
)
def test_prune_rules_each_hold_afterwards(tree, rules, gone):
    said = cache.prune(cache.Rules.of(*rules), dry_run=False, now=NOW)
    assert names(said) == gone
    assert sorted(k for k, f in tree.items() if not f.exists()) == gone


def test_a_dry_run_removes_nothing(tree):
    before = sorted(p for p in cache.images_dir().rglob("*"))
    said = cache.prune(cache.Rules.of(1, None, None), dry_run=True, now=NOW)
    assert [line.split()[:2] for line in said.splitlines()[:-1]] == [["would", "remove"]] * 3
    assert said.splitlines()[-1] == (
        "would free 15.50 GB; the cache's images would hold 3.00 GB in 1 folders"
    )
    assert sorted(p for p in cache.images_dir().rglob("*")) == before


def test_a_folder_a_running_kit_uses_survives_prune(tree):
    """Its mark is held by another process (a campaign): kept, and said; the rules are
    met with the others. In use counts as used now, so keep-last keeps it first."""
    with held_by_a_child(tree["a"]):
        said = cache.prune(cache.Rules.of(None, None, "1G"), dry_run=False, now=NOW)
        assert names(said) == ["b", "c", "d"]
        assert tree["a"].is_dir() and (tree["a"] / "image.sif").is_file()
        said = cache.prune(cache.Rules.of(0, None, None), dry_run=False, now=NOW)
        assert said.splitlines()[0] == f"kept {tree['a']}: in use by a running kit (10.00 GB)"
    said = cache.prune(cache.Rules.of(0, None, None), dry_run=False, now=NOW)  # it ended
    assert names(said) == ["a"] and not tree["a"].exists()


def test_a_kill_minus_9_leaves_no_stale_in_use_mark(tree):
    child = user(tree["a"])
    assert child.stdout.readline() == b"held\n"
    assert marks.in_use(tree["a"])
    child.kill()
    child.wait(timeout=30)
    assert not marks.in_use(tree["a"])


def test_a_kit_starting_on_a_folder_being_removed_makes_it_anew(tree):
    """A removal holds the mark exclusively and renames the folder away: a kit that asks
    to use it then waits, and gets a new folder with a mark of its own."""
    with marks.unused(tree["a"]) as free:
        assert free
        child = user(tree["a"])
        waiting_on_a_flock(child)  # on the removal's mark, not merely slow to start
        tree["a"].rename(tree["a"].with_name("gone"))
    assert child.stdout.readline() == b"held\n"
    assert marks.in_use(tree["a"]) and not marks.in_use(tree["a"].with_name("gone"))
    child.stdin.close()
    child.wait(timeout=30)


def test_prune_clears_what_a_killed_removal_left(tree):
    left = tree["b"].with_name(f"{marks.REMOVING}{tree['b'].name}-123")
    tree["b"].rename(left)
    said = cache.prune(cache.Rules.of(None, "50d", None), dry_run=False, now=NOW)
    assert said == "freed 4.00 GB; the cache's images hold 14.50 GB in 3 folders"
    assert not left.exists()


def test_a_link_in_the_cache_is_not_pruned_through_and_a_tag_shows_on_one_line(tree, tmp_path):
    """A link where an image folder goes: prune marked the folder it points to (outside the
    cache), said it removed it, and left the link renamed for ever. A tag from a metadata
    file holding a newline added a line to kit cache ls."""
    outside = tmp_path.parent / f"{tmp_path.name}-outside"
    (outside / "keep").mkdir(parents=True)
    link = cache.images_dir() / "pytorch-mpich" / ("e" * 16)
    link.symlink_to(outside)
    manifest = tree["a"] / "manifest.json"
    manifest.write_text(json.dumps({"digest": digest("a"), "tag": "kit/a\nINJECTED"}))
    text = cache.listing(None).splitlines()
    assert len(text) == 7 and "kit/a\\nINJECTED" in text[1]  # 4 folders, head, total, ENGINE ?
    said = cache.prune(cache.Rules.of(0, None, None), dry_run=False, now=NOW)
    assert names(said) == ["a", "b", "c", "d"]
    assert link.is_symlink() and sorted(p.name for p in outside.iterdir()) == ["keep"]


def test_a_folder_with_no_stamp_was_last_used_when_it_last_changed(tree):
    (tree["d"] / marks.LAST_USED).unlink()
    os.utime(tree["d"], (NOW - 90 * DAY, NOW - 90 * DAY))
    for f in tree["d"].iterdir():
        os.utime(f, (NOW - 60 * DAY, NOW - 60 * DAY))
    assert cache.folders(None, NOW)[0].path == tree["d"]
    assert names(cache.prune(cache.Rules.of(None, "50d", None), dry_run=True, now=NOW)) == ["d"]


@pytest.mark.parametrize(
    ("text", "value"),
    [("20G", 20 * GB), ("20 GB", 20 * GB), ("500m", 500_000_000), ("1.5T", 1_500 * GB),
     ("8GiB", 8 << 30), ("4096", 4096), ("1kib", 1024)],
)  # fmt: skip
def test_sizes(text, value):
    assert units.size("--max-size", text) == value


@pytest.mark.parametrize("text", ["20X", "", "G", "-1G", "0", "iB", "20 G B", "1e9"])
def test_a_bad_size_names_the_value_and_the_units(text):
    with pytest.raises(KitError) as e:
        units.size("--max-size", text)
    assert str(e.value) == (
        f"--max-size '{text}' must be a size in B, K, M, G or T (powers of 1000; KiB, MiB, "
        "GiB, TiB: of 1024), e.g. 20G or 500M"
    )


def test_ages_take_days():
    assert units.duration("--older-than", "30d") == 30 * DAY
    with pytest.raises(KitError, match=r"--older-than '30y' must be a positive duration in s, m"):
        units.duration("--older-than", "30y")


def test_prune_without_a_rule_or_with_a_bad_one_is_one_line(tmp_path):
    env = {**os.environ, "KIT_CACHE": str(tmp_path)}
    for args, said in (
        ([], "kit: error: kit cache prune needs a rule: --keep-last N, --older-than AGE"),
        (["--max-size", "20X"], "kit: error: --max-size '20X' must be a size in B, K, M, G"),
        (["--keep-last", "-1"], "kit: error: --keep-last -1 must be 0 or more folders\n"),
    ):
        p = subprocess.run(
            [sys.executable, "-m", "kit.cli", "cache", "prune", *args],
            capture_output=True,
            text=True,
            env=env,
        )
        assert (p.returncode, p.stdout) == (2, "") and p.stderr.startswith(said)
        assert len(p.stderr.splitlines()) == 1


def test_use_marks_and_stamps_the_folder_and_tolerates_a_cache_it_cannot_write(
    tmp_path, monkeypatch
):
    monkeypatch.setattr(marks, "_held", {})
    folder = tmp_path / "images" / "x" / "0123"
    marks.use(folder)
    assert (folder / marks.LAST_USED).is_file() and marks.in_use(folder)
    with open(folder / marks.IN_USE) as f, pytest.raises(BlockingIOError):
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)  # what a removal tries
    marks.use(Path("/proc/no/such/folder"))  # no error: used unmarked
    for fd in marks._held.values():
        os.close(fd)


def test_a_cache_that_is_a_file_is_named_not_listed_as_empty(tmp_path, monkeypatch, capsys):
    """KIT_CACHE a file, or its images a file: kit cache ls said "0 image folders", exit 0."""
    from kit import cli
    from kit.image import engine

    monkeypatch.setattr(engine, "image_ids", lambda: None)  # no engine asked (it is cached)
    for made in ("cache", "cache/images"):
        monkeypatch.setenv("KIT_CACHE", str(tmp_path / "cache"))
        (tmp_path / made).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / made).write_text("")
        assert cli.main(["cache", "ls"]) == 2
        assert capsys.readouterr().err == (
            f"kit: error: the cache's folder {tmp_path / made} is a file, not a folder; move "
            "it away, or set KIT_CACHE to a folder\n"
        )
        (tmp_path / made).unlink()
