"""Recipe validation: every mistake names the file, the key and the fix."""

import pytest

from kit import recipes
from kit.errors import KitError


def write(root, text, name="mini-openmpi"):
    (root / "recipes" / f"{name}.toml").write_text(text)


def test_loads_pins_and_flavour(kit_root):
    r = recipes.load("mini-openmpi")
    assert r.all_apt == (
        "python3=3.11.2-1+b1",
        "openmpi-bin=4.1.4-3+b1",
        "libopenmpi-dev=4.1.4-3+b1",
    )
    assert r.tag() == "kit/mini-openmpi:0.1.0-cpu"
    assert r.pip_steps() == [
        ["--no-cache-dir", "setuptools==70.3.0"],
        ["--no-cache-dir", "--no-build-isolation", "--no-binary=mpi4py", "mpi4py==3.1.4"],
    ]


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        (
            'flavour = "openmpi"',
            'flavour = "lam"',
            "mpi flavour 'lam' is not one of mpich, openmpi",
        ),
        ('"mpi4py==3.1.4"', '"mpi4py>=3"', "pip pin 'mpi4py>=3' must look like"),
        ('"python3=3.11.2-1+b1"', '"python3"', "apt pin 'python3' must look like"),
        ('variants = ["cpu"]', 'variants = ["tpu"]', "variant 'tpu' is not one of cpu, cuda"),
        ('name = "mini-openmpi"', 'name = "other"', "must match the file name"),
        ('version = "0.1.0"\n', "", "missing key 'version'"),
        ("[apt]", "[apt", "not valid TOML"),
    ],
)
def test_bad_recipe(kit_root, mini, old, new, message):
    write(kit_root, mini.replace(old, new))
    with pytest.raises(KitError, match=r"mini-openmpi\.toml") as e:
        recipes.load("mini-openmpi")
    assert message in str(e.value)


def test_unknown_image_lists_known(kit_root):
    with pytest.raises(KitError, match=r"unknown image 'nope' \(known: mini-openmpi\)"):
        recipes.load("nope")
