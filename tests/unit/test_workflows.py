"""The GitHub workflows: linted offline, their matrix equal to the recipe list, and the
ci/ scripts they call exercised here."""

import json
import os
import subprocess
import sys
from pathlib import Path

from kit.image import recipes

REPO = Path(__file__).resolve().parents[2]
WORKFLOWS = sorted((REPO / ".github" / "workflows").glob("*.yml"))


def test_matrix_equals_recipe_list():
    p = subprocess.run(
        [sys.executable, str(REPO / "ci" / "matrix.py")], capture_output=True, text=True, check=True
    )
    key, _, value = p.stdout.strip().partition("=")
    assert key == "include"
    got = {(m["image"], m["variant"], m["tag"]) for m in json.loads(value)}
    want = {(r.name, v, r.tag(v)) for r in recipes.load_all().values() for v in r.variants}
    assert got == want and len(json.loads(value)) == len(want)


def test_images_workflow_uses_the_generated_matrix_and_pushes_only_from_main_or_tags():
    text = (REPO / ".github" / "workflows" / "images.yml").read_text()
    assert 'python ci/matrix.py >> "$GITHUB_OUTPUT"' in text
    assert "include: ${{ fromJSON(needs.matrix.outputs.include) }}" in text
    assert "if: github.event_name == 'push' && env.KIT_REGISTRY != ''" in text
    assert "branches: [main]" in text and 'tags: ["v*"]' in text
    tests = (REPO / ".github" / "workflows" / "tests.yml").read_text()
    assert "run: ci/test -ra" in tests


def test_publish_names_tags_from_recipe_version():
    env = {**os.environ, "KIT_REGISTRY": "registry.example"}
    p = subprocess.run(
        [str(REPO / "ci" / "publish"), "--dry-run", "pytorch-mpich", "cpu", "1.0.0", "SomeOrg"],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    dest = "registry.example/someorg/kit-pytorch-mpich"
    assert p.stdout.splitlines() == [
        f"docker tag kit/pytorch-mpich:1.0.0-cpu {dest}:1.0.0-cpu",
        f"docker push {dest}:1.0.0-cpu",
        f"docker tag kit/pytorch-mpich:1.0.0-cpu {dest}:latest-cpu",
        f"docker push {dest}:latest-cpu",
    ]


def test_publish_refuses_without_registry():
    env = {k: v for k, v in os.environ.items() if k != "KIT_REGISTRY"}
    p = subprocess.run(
        [str(REPO / "ci" / "publish"), "--dry-run", "pytorch-mpich", "cpu", "1.0.0", "o"],
        capture_output=True,
        text=True,
        env=env,
    )
    assert p.returncode != 0 and "set KIT_REGISTRY" in p.stderr


def test_tests_workflow_runs_each_image_of_the_all_images_tier_in_a_matrix_cell():
    """Every image only `ci/test --all-images` tests has its cell, and no other."""
    from tests.integration.conftest import ALL_IMAGES_ONLY, IMAGE_OF

    tests = (REPO / ".github" / "workflows" / "tests.yml").read_text()
    cells = tests.split("image: [", 1)[1].split("]", 1)[0].split(", ")
    assert sorted(cells) == sorted(IMAGE_OF[f] for f in ALL_IMAGES_ONLY)
    assert 'run: ci/test --only-image "$IMAGE" -m integration -ra' in tests
    # the tests marked all_images need no image of the matrix: a job of their own runs them
    assert 'run: ci/test --all-images -m "integration and all_images" -ra' in tests
