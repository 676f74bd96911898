"""Every environment variable kit and its scripts read is one row of kit.core.settings."""

import re
from pathlib import Path

import pytest

from kit.core import paths, settings

ROOT = Path(__file__).resolve().parents[3]
# a read of the environment by name: os.environ["X"], os.environ.get("X"), "X" in os.environ,
# os.getenv("X")
READ = re.compile(
    r"""environ(?:\.get)?[\[(]\s*["']([A-Z_]+)["']|["']([A-Z_]+)["']\s+in\s+os\.environ"""
    r"""|getenv\(\s*["']([A-Z_]+)["']"""
)
SCRIPT_READ = re.compile(r"\$\{?(KIT_[A-Z_]+)|process\.env\.(KIT_[A-Z_]+)|secrets\.(KIT_[A-Z_]+)")


def test_docs_settings_table_is_the_registry():
    text = (ROOT / "docs" / "settings.md").read_text()
    assert settings.table() in text


def test_kit_reads_no_setting_but_through_the_registry():
    ours = {n for s in settings.SETTINGS for n in s.names}
    found = {}
    for path in (ROOT / "runner" / "kit").rglob("*.py"):
        if path.name == "settings.py":
            continue
        for m in READ.finditer(path.read_text()):
            name = next(g for g in m.groups() if g)
            if name in ours or name.startswith("KIT_"):  # not the system's PATH, USER, …
                found[name] = path.relative_to(ROOT)
    assert found == {}, "read kit.core.settings.value(NAME) instead"


def test_every_variable_the_scripts_and_workflows_read_is_documented():
    read: set[str] = set()
    scripts = [p for p in (ROOT / "ci").iterdir() if p.is_file()]
    scripts += [*(ROOT / ".github" / "workflows").glob("*.yml"), ROOT / ".ci" / "run"]
    for path in scripts:
        text = path.read_text()
        read |= {g for m in SCRIPT_READ.finditer(text) for g in m.groups() if g}
        read |= {g for m in READ.finditer(text) for g in m.groups() if g and g.startswith("KIT_")}
    documented = {n for s in settings.SETTINGS for n in s.names}
    assert read and read - documented == set()


def test_an_empty_setting_means_its_default_and_an_unknown_name_is_refused(monkeypatch):
    monkeypatch.setenv("KIT_CACHE", "")
    monkeypatch.setenv("XDG_CACHE_HOME", "/xdg")
    assert paths.cache_dir() == Path("/xdg/kit")
    monkeypatch.setenv("KIT_CACHE", "/c")
    assert paths.cache_dir() == Path("/c")
    with pytest.raises(KeyError, match="KIT_TRIAL is not a setting"):
        settings.value("KIT_TRIAL")


def test_doctor_names_the_settings_set_here_and_no_script_s(monkeypatch):
    for name in settings.KIT_READS:
        monkeypatch.delenv(name, raising=False)
    assert settings.said().startswith("settings: none set; ")
    monkeypatch.setenv("KIT_CATALOGUE", "off")
    monkeypatch.setenv("KIT_USER", "someone")  # ci/*'s, not kit's
    assert settings.said().startswith("settings: KIT_CATALOGUE=off; the rest at their defaults")
