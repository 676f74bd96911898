"""kit completion bash, generated from the parser, driven in bash as the shell drives it;
and the options whose values --help lists (the completion completes those values)."""

import shutil
import subprocess

import pytest

from kit import cli
from kit.cli import images, results
from kit.report import writers

CASES = [
    (["kit", "re"], "render report results"),
    (["kit", "cache", ""], "ls prune -h --help"),
    (["kit", "report", "--format", ""], "md csv json html"),
    (["kit", "report", "d", "--format", "j"], "json"),
    (["kit", "import", "x", "--build", "a"], "apptainer"),
    (["kit", "results", "ls", "--j"], "--json"),
    (["kit", "-q", "ch"], "check"),
    (["kit", "run", "--dry"], "--dry-run"),
    (["kit", "completion", ""], "bash -h --help -q --quiet -v --verbose"),
]


@pytest.mark.skipif(shutil.which("bash") is None, reason="no bash here")
@pytest.mark.parametrize("words, want", CASES)
def test_bash_completes_commands_options_and_listed_values(words, want, capsys, tmp_path):
    assert cli.main(["completion", "bash"]) == 0
    script = tmp_path / "kit.bash"
    script.write_text(capsys.readouterr().out)
    typed = " ".join(f"'{w}'" for w in words)
    drive = (
        f"source {script}; COMP_WORDS=({typed}); COMP_CWORD={len(words) - 1}; _kit; "
        'echo "${COMPREPLY[*]}"'
    )
    said = subprocess.run(["bash", "-c", drive], capture_output=True, text=True, check=True)
    assert said.stdout.strip() == want


def test_help_lists_the_values_of_format_and_build():
    assert results.REPORT_FORMATS == writers.FORMATS
    commands = cli.commands(cli.parser())
    for name, option, values in (
        ("report", "--format", writers.FORMATS),
        ("export", "--format", results.EXPORT_FORMATS),
        ("import", "--build", images.BUILDS),
    ):
        assert f"{option} {{{','.join(values)}}}" in commands[name].format_help()
