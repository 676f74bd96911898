"""Recipe validation: every mistake names the file, the key and the fix."""

import tomllib
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kit.core import inputs
from kit.core.errors import KitError
from kit.image import recipes

from ...conftest import MINI
from ..pipes import unblocked


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
        ('"mpi4py==3.1.4"', '"mpi4py>=3"', "[pip] packages: 'mpi4py>=3' is not allowed here"),
        ('"python3=3.11.2-1+b1"', '"python3"', "[apt] packages: 'python3' is not allowed here"),
        ('variants = ["cpu"]', 'variants = ["tpu"]', ": variants: 'tpu' is not allowed here"),
        ("from_source =", "form_source =", "[pip] unknown key 'form_source' (known: build, fr"),
        ('version = "0.1.0"', "version = 1", ": version: must be a str, got int"),
        ('name = "mini-openmpi"', 'name = "$(id)"', "name: '$(id)' is not allowed here"),
        ("[mpi]", '[env]\nX = "a\\nb"\n[mpi]', "[env] X: 'a\\nb' is not allowed here"),
        ("[mpi]", '[env]\n"A B" = "x"\n[mpi]', "[env] key 'A B' is not allowed"),
        ('name = "mini', 'extends = "../etc/x"\nname = "mini', "extends '../etc/x' must name"),
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


@pytest.mark.parametrize("name", ["nope", "../recipes/mini-openmpi", "/etc/passwd", "x" * 300])
def test_unknown_image_lists_known(kit_root, name):
    with pytest.raises(KitError, match=r"unknown image '.*' \(known: mini-openmpi\)"):
        recipes.load(name)


def test_extends_merges_tables_and_replaces_values(kit_root):
    write(
        kit_root,
        'extends = "mini-openmpi"\nname = "mini-mpich"\n[mpi]\nflavour = "mpich"\n'
        '[apt]\npackages = ["python3=3.11.2-1+b1", "gcc=4:12.2.0-3"]\n',
        name="mini-mpich",
    )
    r = recipes.load("mini-mpich")
    assert (r.name, r.version, r.mpi.flavour, r.mpi.version) == (
        "mini-mpich",
        "0.1.0",
        "mpich",
        "4.1.4-3+b1",
    )
    assert r.apt == ("python3=3.11.2-1+b1", "gcc=4:12.2.0-3")
    assert r.pip == ("mpi4py==3.1.4",)


def test_extends_errors(kit_root):
    write(kit_root, 'extends = "nope"\nname = "a"\n', name="a")
    with pytest.raises(KitError, match=r"a\.toml: extends unknown recipe 'nope'"):
        recipes.load("a")
    write(kit_root, 'extends = "b"\nname = "a"\n', name="a")
    write(kit_root, 'extends = "a"\nname = "b"\n', name="b")
    with pytest.raises(KitError, match="'extends' loops back"):
        recipes.load("a")


def test_a_pipe_or_a_deep_nest_among_the_recipes_is_one_line_never_a_hang(kit_root, monkeypatch):
    """kit list and render read every recipes/*.toml: a named pipe there waited in open()
    for a writer for ever, and a nest of arrays was tomllib's RecursionError traceback."""
    monkeypatch.setattr(inputs, "PIPE_WAIT", 0.1)
    pipe = kit_root / "recipes" / "a-pipe.toml"
    unblocked(pipe)
    with pytest.raises(KitError) as e:
        recipes.load_all()
    assert str(e.value) == (
        f"{pipe}: a pipe nothing wrote to in 0.1 s; give a recipe's TOML text, or move it out "
        "of recipes/"
    )
    pipe.unlink()
    write(kit_root, "a = " + "[" * 100_000, name="deep")
    deep = r"deep\.toml: nested too deeply to be a recipe; give a recipe's TOML text, or move it"
    with pytest.raises(KitError, match=deep + r" out of recipes/$"):
        recipes.load_all()


def test_compile_section(kit_root, mini):
    write(
        kit_root,
        mini.replace('from_source = ["mpi4py"]\n', "")
        + '[compile]\npackages = ["horovod==0.28.1"]\ncheck = ["horovodrun --check-build"]\n'
        + '[compile.env]\nHOROVOD_WITH_MPI = "1"\n',
    )
    r = recipes.load("mini-openmpi")
    assert r.compile == recipes.Compile(
        ("horovod==0.28.1",), (("HOROVOD_WITH_MPI", "1"),), ("horovodrun --check-build",)
    )
    assert r.compile_args() == [
        "--no-cache-dir",
        "--no-build-isolation",
        "--no-deps",
        "--no-binary=horovod",
        "horovod==0.28.1",
    ]


VALUES = st.recursive(
    st.one_of(st.text(max_size=12), st.integers(), st.booleans(), st.floats(allow_nan=False)),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=6,
)


@given(path=st.lists(st.sampled_from(["name", "mpi", "apt", "pip", "env", "compile",
                                      "variant", "cuda", "packages", "version", "x"]),
                     min_size=1, max_size=3),
       value=VALUES)  # fmt: skip
def test_any_recipe_gives_a_recipe_or_a_kit_error(path, value):
    """Put any value at any place in a valid recipe: it loads or says why, in one line."""
    data = tomllib.loads(MINI)
    table = data
    for key in path[:-1]:
        table = table.setdefault(key, {}) if isinstance(table.get(key, {}), dict) else {}
    table[path[-1]] = value
    try:
        r = recipes._build(data, Path("recipes/mini-openmpi.toml"))
    except KitError as e:
        assert "\n" not in str(e).replace("\\n", "")
    else:
        assert r.name == "mini-openmpi"
