"""Files kit writes whole or not at all."""

import pytest

from kit.core.paths import made_whole, write_atomically


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
