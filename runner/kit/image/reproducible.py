"""An image in its reproducible form: the same bytes from the same content, on any
machine, at any time.

Docker 20.10's BuildKit stamps each file of a layer with the time it was written and the
config with the time of the build (it predates SOURCE_DATE_EPOCH). So `kit build` and
`kit base` pass what they made through this writer, as BuildKit's rewrite-timestamp and
apko do: each layer is written again with every mtime clamped to the recipe's epoch,
owner names and access/change times dropped, its entries in the order the engine wrote
them (a sorted walk of the layer); the config keeps what the image is (environment,
labels, command, layers) with the epoch as every date, and its history without the
build arguments (a site's index or mirror). The image's ID, the SHA-256 of its config,
then depends on its content alone. What a layer holds is the recipe's business: the
rendered steps leave no logs, caches or timestamped `.pyc` behind (kit.image.blocks).
"""

import contextlib
import hashlib
import io
import json
import re
import subprocess
import tarfile
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, TypeVar

from kit.core.errors import Failed, KitError
from kit.core.paths import cache_dir, scratch, write_atomically
from kit.image import engine

# The image config's fields that say what the image is; the rest (the builder's
# container, its host name, BuildKit's inline cache) says how one build went.
RUN_CONFIG = (
    "User",
    "ExposedPorts",
    "Env",
    "Entrypoint",
    "Cmd",
    "Volumes",
    "WorkingDir",
    "Labels",
    "StopSignal",
    "Shell",
    "Healthcheck",
    "OnBuild",
)
BUILD_ARGS = re.compile(r"\|\d+ (?:[A-Za-z_][A-Za-z0-9_]*=\S* )*")  # RUN |2 A=x B=y cmd
CHUNK = 1 << 20
T = TypeVar("T")


def stamp(epoch: int) -> str:
    """The epoch as the config's dates are written (RFC 3339, UTC, whole seconds)."""
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class _Hashing(io.RawIOBase):
    """A write-only stream that hashes what passes through it to `out`."""

    def __init__(self, out: IO[bytes]) -> None:
        self.out, self.sha = out, hashlib.sha256()

    def writable(self) -> bool:
        return True

    def write(self, data) -> int:  # type: ignore[override]
        self.sha.update(data)
        self.out.write(data)
        return len(data)


def normal_member(member: tarfile.TarInfo, epoch: int) -> tarfile.TarInfo:
    """One entry as the reproducible layer holds it: mtime clamped to the epoch, no owner
    names (the numeric owner stays), no access or change times; extended attributes
    (file capabilities) kept."""
    member.mtime = min(int(member.mtime), epoch)
    member.uname = member.gname = ""
    member.pax_headers = {
        k: v for k, v in member.pax_headers.items() if k.startswith("SCHILY.xattr.")
    }
    return member


def write_layer(src: IO[bytes], dst: IO[bytes], epoch: int) -> str:
    """Copy the layer tar `src` to `dst` in its reproducible form; its diff ID."""
    hashing = _Hashing(dst)
    with (
        tarfile.open(fileobj=src, mode="r|") as inp,
        tarfile.open(fileobj=hashing, mode="w|", format=tarfile.PAX_FORMAT) as out,
    ):
        out.copybufsize = CHUNK
        for member in inp:
            data = inp.extractfile(member) if member.isreg() else None
            out.addfile(normal_member(member, epoch), data)
    return "sha256:" + hashing.sha.hexdigest()


def plain_history(created_by: str) -> str:
    """A history line without the build arguments BuildKit writes into RUN lines."""
    return BUILD_ARGS.sub("", created_by, count=1)


def normal_config(config: dict, diff_ids: list[str], epoch: int) -> bytes:
    """The config's bytes: what the image is, dated at the epoch, keys sorted."""
    when = stamp(epoch)
    run = config.get("config") or {}
    history = []
    for h in config.get("history") or []:
        line = {"created": when, "created_by": plain_history(h.get("created_by", ""))}
        if h.get("empty_layer"):
            line["empty_layer"] = True
        history.append(line)
    out = {
        "architecture": config.get("architecture", "amd64"),
        "os": config.get("os", "linux"),
        "config": {k: run[k] for k in RUN_CONFIG if run.get(k) not in (None, "", [], {})},
        "created": when,
        "history": history,
        "rootfs": {"type": "layers", "diff_ids": diff_ids},
    }
    if config.get("variant"):
        out["variant"] = config["variant"]
    return json.dumps(out, sort_keys=True, separators=(",", ":")).encode()


def read_saved(stream: IO[bytes], per_layer: Callable[[IO[bytes], int], T]) -> tuple[dict, list[T]]:
    """Read a `docker save` stream: the image's config, and what `per_layer` made of each
    layer tar (given the tar and its index as it passed), in the image's order. Layers are
    handled as they pass (a multi-GB image is never held in memory or written out whole);
    the manifest that orders them comes last."""
    made: dict[str, T] = {}  # the archive's layer path -> what per_layer made of it
    links: dict[str, str] = {}  # a layer that `docker save` wrote as a link to another
    blobs: dict[str, bytes] = {}
    with tarfile.open(fileobj=stream, mode="r|") as archive:
        for member in archive:
            name = member.name.removeprefix("./")
            if name.endswith("layer.tar") and member.issym():
                target = Path(name).parent.joinpath(member.linkname).as_posix()
                links[name] = re.sub(r"[^/]+/\.\./", "", target)
            elif name.endswith("layer.tar") and member.isreg():
                data = archive.extractfile(member)
                assert data is not None
                made[name] = per_layer(data, len(made))
            elif member.isreg() and name.endswith(".json") and "/" not in name:
                data = archive.extractfile(member)
                assert data is not None
                blobs[name] = data.read()
    try:
        manifest = json.loads(blobs["manifest.json"])[0]
        config = json.loads(blobs[manifest["Config"]])
        return config, [made[links.get(p, p)] for p in manifest["Layers"]]
    except (KeyError, IndexError, TypeError, ValueError) as e:
        raise KitError(f"'docker save' wrote no image kit can read ({e})") from None


@contextlib.contextmanager
def saved(ref: str) -> Iterator[IO[bytes]]:
    """`docker save ref` as a stream; a failed save is one line."""
    save = subprocess.Popen(
        [engine.docker(), "save", ref], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert save.stdout is not None and save.stderr is not None
    try:
        yield save.stdout
    except BaseException as e:  # the save is stopped and reaped, whatever stopped the read
        save.kill()
        save.wait()
        save.stderr.close()
        if isinstance(e, tarfile.TarError | OSError):
            raise Failed(f"reading 'docker save {ref}' failed: {e}") from None
        raise
    finally:
        save.stdout.close()
    err = save.stderr.read().decode(errors="replace")
    if save.wait() != 0:
        raise Failed(f"docker save {ref} failed: {err.strip()[-300:]}")


class Loading:
    """A `docker load` fed as the layers are written: each layer's tar goes into its
    archive as soon as it is whole, so the scratch disk holds one layer at a time, not
    the image. The config and the manifest (which names the layers in the image's order)
    go last: docker load reads the whole archive before its manifest."""

    def __init__(self, tag: str) -> None:
        self.tag = tag
        self.proc = subprocess.Popen(
            [engine.docker(), "load", "--quiet"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        assert self.proc.stdin is not None
        self.archive = tarfile.open(  # noqa: SIM115 -- closed by finish, the archive's end
            fileobj=self.proc.stdin, mode="w|", format=tarfile.PAX_FORMAT
        )
        self.archive.copybufsize = CHUNK
        self.added = 0

    def _send(self, name: str, size: int, data: IO[bytes]) -> None:
        """One archive entry into the engine. An engine that stopped reading is its own
        error, said here: raised as a broken pipe, it would be taken for a failed read of
        the `docker save` the layers come from (saved)."""
        info = tarfile.TarInfo(name)
        info.size = size
        try:
            self.archive.addfile(info, data)
        except BrokenPipeError:
            self._ended()
            raise Failed(f"docker load of the reproducible {self.tag} stopped reading") from None

    def add(self, layer: Path) -> str:
        """Send one layer's tar; its name in the archive."""
        name = f"{self.added:03d}/layer.tar"
        with layer.open("rb") as f:
            self._send(name, layer.stat().st_size, f)
        self.added += 1
        return name

    def finish(self, config: bytes, layers: list[str]) -> str:
        """Send the config and a manifest naming the tag and `layers` (add's names, in the
        image's order), and wait for the engine: the image's ID (the config's SHA-256)."""
        config_name = hashlib.sha256(config).hexdigest() + ".json"
        manifest = json.dumps([{"Config": config_name, "RepoTags": [self.tag], "Layers": layers}])
        for name, data in ((config_name, config), ("manifest.json", manifest.encode())):
            self._send(name, len(data), io.BytesIO(data))
        self._ended()
        return "sha256:" + hashlib.sha256(config).hexdigest()

    def _ended(self) -> None:
        """End the archive (once) and the engine's input, and wait for the engine; a
        failed load is one line. An engine that stopped reading says why in it."""
        with contextlib.suppress(BrokenPipeError):
            self.archive.close()
        _, err = self.proc.communicate()
        if self.proc.returncode != 0:
            tail = (err.decode(errors="replace").strip().splitlines() or ["no output"])[-1]
            raise Failed(f"docker load of the reproducible {self.tag} failed: {tail}")


@contextlib.contextmanager
def loading(tag: str) -> Iterator[Loading]:
    """A Loading into the engine as tag; on an error the load is stopped before its
    manifest, so no image is made."""
    into = Loading(tag)
    try:
        yield into
    except BaseException:
        into.proc.kill()
        with contextlib.suppress(Failed):  # killed: the error that stopped it is the one
            into._ended()
        raise


def load(config: bytes, layers: list[Path], tag: str) -> str:
    """`docker load` the image and tag it; its ID (the config's SHA-256)."""
    with loading(tag) as into:
        return into.finish(config, [into.add(layer) for layer in layers])


# The writer's own version, part of every build's inputs (kit.image.build.inputs_key):
# an image written by another form of this writer is not reused.
FORM = "2"


def _noted(name: str) -> Path:
    return cache_dir() / "reproducible" / name


def _note(name: str, made: str) -> None:
    note = _noted(name)
    note.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(note, made + "\n")


def _present(name: str) -> str | None:
    """The image a note names, while the engine has it."""
    note = _noted(name)
    made = note.read_text().strip() if note.is_file() else ""
    return made if made and engine.found(made) is not None else None


def made_from(key: str) -> str | None:
    """The image a build with these inputs made, when the engine still has it: built
    again, it would be the same image (what a full BuildKit cache hit gives), so kit does
    not need BuildKit's cache of it."""
    return _present(f"inputs-{key}")


def note_inputs(key: str, made: str) -> None:
    _note(f"inputs-{key}", made)


def rewrite(raw: str, tag: str, epoch: int, labels: dict[str, str] | None = None) -> str:
    """The engine's image `raw` (an ID or reference) written again in reproducible form,
    with `labels` added to its config, and tagged `tag`; its ID. A raw image written
    before (BuildKit answered from its cache) is not written twice."""
    raw_id = engine.image_id(raw)
    if made := _present(raw_id.removeprefix("sha256:")):
        engine.run_quiet(["tag", made, tag], "docker tag")
        return made
    with scratch("reproducible-") as folder, loading(tag) as into:

        def write(layer: IO[bytes], index: int) -> tuple[str, str]:
            path = folder / f"layer-{index}.tar"  # the diff ID is known once it is whole
            try:
                with path.open("wb") as out:
                    diff_id = write_layer(layer, out, epoch)
                return into.add(path), diff_id
            finally:
                path.unlink(missing_ok=True)

        with saved(raw_id) as stream:
            config, layers = read_saved(stream, write)
        run = config.setdefault("config", {})
        run["Labels"] = {**(run.get("Labels") or {}), **(labels or {})}
        diff_ids = [d for _, d in layers]
        made = into.finish(normal_config(config, diff_ids, epoch), [n for n, _ in layers])
    _note(raw_id.removeprefix("sha256:"), made)
    return made


def from_rootfs(rootfs: Path, tag: str, epoch: int, config: dict, history: str) -> str:
    """A one-layer image from a root file system's tar (the Debian base), reproducible."""
    with scratch("reproducible-") as folder:
        layer = folder / "layer.tar"
        with rootfs.open("rb") as src, layer.open("wb") as dst:
            diff_id = write_layer(src, dst, epoch)
        full = {"config": config, "history": [{"created_by": history}]}
        return load(normal_config(full, [diff_id], epoch), [layer], tag)
