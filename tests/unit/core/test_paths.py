"""Files kit writes whole or not at all."""

import pytest

from kit.core.paths import write_atomically


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
