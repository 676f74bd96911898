"""ci/provision asks apt for a tool's package only when the tool is not already on PATH
at its minimum version (issue #33: NodeSource's nodejs bundles npm and conflicts with
Debian's npm, so asking for `npm` there broke provisioning)."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

PROVISION = Path(__file__).resolve().parents[2] / "ci" / "provision"
BASH = shutil.which("bash") or "/bin/bash"
SH = shutil.which("sh") or "/bin/sh"
NODE_APT = {"nodejs", "npm"}


def machine(tmp_path: Path, on_path: dict[str, str], dpkg: set[str]) -> dict[str, str]:
    """A PATH holding only fake tools (each prints its version line) and a fake dpkg-query
    that reports `dpkg` as installed: the script's choice sees nothing of this host."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, line in {**on_path, "dpkg-query": ""}.items():
        body = (
            f'echo "{line}"'
            if name != "dpkg-query"
            else (
                "for p; do :; done\n"
                f'case " {" ".join(sorted(dpkg))} " in *" $p "*) printf "install ok installed";; '
                "*) exit 1;; esac"
            )
        )
        tool = bin_dir / name
        tool.write_text(f"#!{SH}\n{body}\n")
        tool.chmod(0o755)
    return {"PATH": str(bin_dir)}


def asked_for(env: dict[str, str], *args: str) -> tuple[set[str], str]:
    out = subprocess.run(
        [BASH, str(PROVISION), *args, "--print-packages"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    install = next(line for line in out.splitlines() if line.strip().startswith("install:"))
    return set(install.split(":", 1)[1].split()), out


def test_nodesource_node_is_reused_and_debian_npm_not_asked_for(tmp_path):
    env = machine(tmp_path, {"node": "v20.20.2", "npm": "11.19.1"}, dpkg={"nodejs"})
    packages, out = asked_for(env)
    assert not packages & NODE_APT
    assert "not Debian's npm" in out and "not Debian's nodejs" not in out  # nodejs: dpkg's
    assert {"docker.io", "mpich", "chromium"} <= packages  # the rest is still asked for


def test_debian_node_is_kept(tmp_path):
    env = machine(tmp_path, {"node": "v18.19.0", "npm": "9.2.0"}, dpkg={"nodejs", "npm"})
    packages, out = asked_for(env)
    assert not packages & NODE_APT and "reusing" not in out  # installed: nothing to say


def test_no_node_gets_debian_packages(tmp_path):
    assert asked_for(machine(tmp_path, {}, dpkg=set()))[0] >= NODE_APT


def test_a_tool_below_its_minimum_is_not_reused(tmp_path):
    env = machine(tmp_path, {"node": "v12.22.12", "npm": "6.14.16"}, dpkg=set())
    assert asked_for(env)[0] >= NODE_APT


def test_an_engine_from_elsewhere_is_reused_a_client_alone_is_not(tmp_path):
    engine = machine(tmp_path, {"dockerd": "Docker version 28.2.2, build e6534b4"}, set())
    assert "docker.io" not in asked_for(engine, "--for", "demo-build")[0]
    client = tmp_path / "client"
    client.mkdir()
    env = machine(client, {"docker": "Docker version 28.2.2, build e6534b4"}, set())
    assert "docker.io" in asked_for(env, "--for", "demo-build")[0]


@pytest.mark.parametrize("purpose", ["demo", "demo-build"])
def test_demo_provisioning_asks_for_no_node(tmp_path, purpose):
    assert not asked_for(machine(tmp_path, {}, set()), "--for", purpose)[0] & NODE_APT


def test_unknown_arguments_are_refused_in_one_line(tmp_path):
    run = subprocess.run(
        [BASH, str(PROVISION), "--for", "nodes"],
        env={"PATH": os.defpath},
        capture_output=True,
        text=True,
    )
    assert run.returncode == 2 and run.stderr.count("\n") == 1
    assert "unknown arguments '--for nodes'" in run.stderr
