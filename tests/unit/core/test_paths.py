"""Files kit writes whole or not at all."""

import os

import pytest

from kit.core import paths
from kit.core.errors import KitError
from kit.core.paths import link_or_copy, made_whole, make_dir, write_atomically


def test_a_write_replaces_a_symlink_and_a_failed_one_leaves_the_old_file(tmp_path):
    target = tmp_path / "elsewhere.md"
    target.write_text("the user's file\n")
    report = tmp_path / "report.md"
    report.symlink_to(target)
    write_atomically(report, "# report\n")
    assert not report.is_symlink() and report.read_text() == "# report\n"
    assert target.read_text() == "the user's file\n"  # never written through
    with pytest.raises(UnicodeEncodeError):  # fails after the temporary file was opened
        write_atomically(report, "# half\n\udcff")
    assert report.read_text() == "# report\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["elsewhere.md", "report.md"]


def test_a_file_made_whole_is_there_complete_or_not_at_all(tmp_path):
    """A conversion that fails (a full disk) or is interrupted leaves no .part behind:
    at 2 GB an image, leftovers fill a disk the next run needs."""
    sif = tmp_path / "image.sif"
    with pytest.raises(OSError), made_whole(sif) as part:
        part.write_text("half")
        raise OSError(28, "No space left on device")
    assert list(tmp_path.iterdir()) == []
    with made_whole(sif) as part:
        assert part == tmp_path / "image.sif.part"
        part.write_text("whole")
    assert [p.name for p in tmp_path.iterdir()] == ["image.sif"] and sif.read_text() == "whole"


@pytest.mark.parametrize(
    ("make", "said"),
    [
        (lambda t: (t / "f").write_text(""), "--out '{t}/f/x' cannot be made (Not a directory)"),
        (
            lambda t: (t / "f").symlink_to(t / "gone"),
            "--out '{t}/f/x' cannot be made (File exists)",
        ),
        (lambda t: os.mkfifo(t / "f"), "--out '{t}/f/x' cannot be made (Not a directory)"),
    ],
)
def test_a_folder_that_cannot_be_made_is_found_without_making_it(tmp_path, make, said):
    """The dry run's answer (found by looking) is the run's (found by mkdir -p), word for
    word; the dry run leaves the disk as it was."""
    make(tmp_path)
    before = sorted(tmp_path.iterdir())
    with pytest.raises(KitError) as dry:
        make_dir(tmp_path / "f" / "x", "--out", dry_run=True)
    assert sorted(tmp_path.iterdir()) == before
    with pytest.raises(KitError) as real:
        make_dir(tmp_path / "f" / "x", "--out")
    assert str(dry.value) == str(real.value) == said.format(t=tmp_path) + "; choose another folder"


def test_a_folder_is_made_with_its_parents_or_only_checked(tmp_path):
    make_dir(tmp_path / "a" / "b", "--out", dry_run=True)
    assert not (tmp_path / "a").exists()
    make_dir(tmp_path / "a" / "b", "--out")
    assert (tmp_path / "a" / "b").is_dir()


def test_one_flock_idiom_shared_exclusive_waiting_or_not(tmp_path):
    """kit takes every flock through paths.flock: no other module calls fcntl.flock."""
    import re
    from pathlib import Path

    from kit.core import paths

    runner = Path(paths.__file__).parents[1]
    calling = [
        p.relative_to(runner).as_posix()
        for p in runner.rglob("*.py")
        if re.search(r"fcntl\.flock\(", p.read_text())
    ]
    assert calling == ["core/paths.py"]
    f = tmp_path / "lock"
    f.touch()
    a, b = (os.open(f, os.O_RDONLY) for _ in range(2))
    try:
        assert paths.flock(a, shared=True) and paths.flock(b, shared=True)  # readers share
        assert not paths.flock(b)  # a writer is refused while a reader holds it
        os.close(a)
        assert paths.flock(b, wait=True)  # ... and takes it once the reader is gone
    finally:
        os.close(b)


def test_kit_formats_its_plain_text_tables_through_core_columns():
    """No module pads cells by hand (f"{cell:<{width}}"): core.columns.aligned sets every
    table kit prints (doctor's, kit list's, kit cache ls's, the runtimes in --help)."""
    import re
    from pathlib import Path

    from kit.core import columns, paths

    runner = Path(paths.__file__).parents[1]
    padding = re.compile(r":[<>]\{?\d*\w*\}?\}")
    by_hand = [
        p.relative_to(runner).as_posix()
        for p in runner.rglob("*.py")
        if padding.search(p.read_text())
    ]
    assert by_hand == ["run/progress.py"]  # a line as each trial ends: no table to align
    assert columns.aligned([("a", "bb", "c"), ("ccc", "d"), ("e", "f", "g")], right={1}) == [
        "a    bb  c",
        "ccc  d",
        "e     f  g",
    ]


def test_a_file_is_linked_where_it_can_be_and_copied_where_it_cannot(tmp_path, monkeypatch):
    source = tmp_path / "image.sqfs"
    source.write_bytes(b"hsqs" * 1000)
    link_or_copy(source, tmp_path / "linked")
    assert (tmp_path / "linked").stat().st_ino == source.stat().st_ino

    def across_file_systems(src, dst):
        raise OSError(18, "Invalid cross-device link")

    monkeypatch.setattr(paths.os, "link", across_file_systems)
    link_or_copy(source, tmp_path / "copied")
    copied = tmp_path / "copied"
    assert copied.read_bytes() == source.read_bytes()
    assert copied.stat().st_ino != source.stat().st_ino
    with pytest.raises(KitError, match=r"copy image\.sqfs"):
        link_or_copy(source, tmp_path / "no-folder" / "copied")
