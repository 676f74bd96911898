"""The reproducible form of an image and kit verify's comparison, on tars made here."""

import io
import json
import tarfile

import pytest

from kit.core.errors import KitError
from kit.image import reproducible, verify

EPOCH = 1795824000


def tar_of(entries: list[tuple], fmt: int = tarfile.GNU_FORMAT) -> bytes:
    """A tar from (name, kind, data/target, mode, mtime, extra) tuples."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=fmt) as tar:
        for name, kind, data, mode, mtime, *extra in entries:
            info = tarfile.TarInfo(name)
            info.type, info.mode, info.mtime = kind, mode, mtime
            info.uname, info.gname = "builder", "staff"
            if extra:
                info.pax_headers = extra[0]
            if kind == tarfile.SYMTYPE:
                info.linkname = data
                tar.addfile(info)
            elif kind == tarfile.DIRTYPE:
                tar.addfile(info)
            else:
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


def layer(mtime: int, content: bytes = b"print(1)\n", mode: int = 0o644) -> bytes:
    return tar_of(
        [
            ("opt", tarfile.DIRTYPE, None, 0o755, mtime),
            ("opt/a.py", tarfile.REGTYPE, content, mode, mtime),
            ("opt/old.txt", tarfile.REGTYPE, b"from a .deb\n", 0o644, 1600000000),
            ("opt/link", tarfile.SYMTYPE, "a.py", 0o777, mtime),
        ],
        tarfile.PAX_FORMAT,
    )


def rewritten(raw: bytes) -> tuple[bytes, str]:
    out = io.BytesIO()
    digest = reproducible.write_layer(io.BytesIO(raw), out, EPOCH)
    return out.getvalue(), digest


def test_two_builds_at_different_times_give_the_same_layer_bytes_and_diff_id():
    first, id1 = rewritten(layer(EPOCH + 3600))
    second, id2 = rewritten(layer(EPOCH + 86400 * 3))
    assert first == second and id1 == id2
    assert id1.startswith("sha256:") and len(id1) == 71


def test_a_rewritten_layer_clamps_dates_to_the_epoch_keeps_older_ones_and_owner_numbers():
    out, _ = rewritten(layer(EPOCH + 3600))
    with tarfile.open(fileobj=io.BytesIO(out)) as tar:
        members = {m.name: m for m in tar}
    assert members["opt/a.py"].mtime == EPOCH
    assert members["opt/old.txt"].mtime == 1600000000  # a package's own date stays
    assert all(m.uname == "" and m.gname == "" for m in members.values())
    assert list(members) == ["opt", "opt/a.py", "opt/old.txt", "opt/link"]


def test_access_and_change_times_go_and_file_capabilities_stay():
    caps = {"SCHILY.xattr.security.capability": "\x01\x00\x00\x02", "atime": "1.5"}
    raw = tar_of([("ping", tarfile.REGTYPE, b"x", 0o755, EPOCH + 5, caps)], tarfile.PAX_FORMAT)
    out, _ = rewritten(raw)
    with tarfile.open(fileobj=io.BytesIO(out)) as tar:
        (ping,) = list(tar)
    assert ping.pax_headers == {"SCHILY.xattr.security.capability": "\x01\x00\x00\x02"}


def test_a_changed_byte_changes_the_diff_id():
    assert rewritten(layer(EPOCH))[1] != rewritten(layer(EPOCH, content=b"print(2)\n"))[1]


def test_the_config_keeps_what_the_image_is_and_dates_it_at_the_epoch():
    config = {
        "architecture": "amd64",
        "os": "linux",
        "created": "2026-11-28T09:13:02.123Z",
        "container": "4f2a",
        "docker_version": "20.10.24",
        "moby.buildkit.cache.v0": "eyJ...",
        "config": {
            "Hostname": "4f2a",
            "Env": ["PATH=/usr/bin"],
            "Cmd": ["/bin/bash"],
            "Labels": {"kit.recipe": "x"},
            "Image": "sha256:0b1",
            "Entrypoint": None,
        },
        "history": [
            {"created": "2026-11-28T09:10:00Z", "created_by": "mmdebstrap bookworm"},
            {
                "created": "2026-11-28T09:13:00Z",
                "created_by": "RUN |2 KIT_PIP_INDEX_URL=https://mirror.example/simple "
                "SOURCE_DATE_EPOCH=1795824000 /bin/bash -o pipefail -c pip install x",
                "comment": "buildkit.dockerfile.v0",
            },
            {"created": "2026-11-28T09:13:01Z", "created_by": "ENV A=b", "empty_layer": True},
        ],
    }
    text = reproducible.normal_config(config, ["sha256:aa", "sha256:bb"], EPOCH)
    assert json.loads(text) == {
        "architecture": "amd64",
        "os": "linux",
        "created": "2026-11-28T00:00:00Z",
        "config": {"Env": ["PATH=/usr/bin"], "Cmd": ["/bin/bash"], "Labels": {"kit.recipe": "x"}},
        "history": [
            {"created": "2026-11-28T00:00:00Z", "created_by": "mmdebstrap bookworm"},
            {
                "created": "2026-11-28T00:00:00Z",
                "created_by": "RUN /bin/bash -o pipefail -c pip install x",
            },
            {"created": "2026-11-28T00:00:00Z", "created_by": "ENV A=b", "empty_layer": True},
        ],
        "rootfs": {"type": "layers", "diff_ids": ["sha256:aa", "sha256:bb"]},
    }
    other_site = json.loads(json.dumps(config).replace("mirror.example", "other.example"))
    assert reproducible.normal_config(other_site, ["sha256:aa", "sha256:bb"], EPOCH) == text


def saved_archive(
    layers: dict[str, bytes], order: list[str], link: tuple[str, str] | None
) -> bytes:
    """What `docker save` writes: layer folders, the config, a manifest naming the order."""
    config = json.dumps({"config": {}, "history": []}).encode()
    manifest = json.dumps([{"Config": "c0ffee.json", "Layers": order}]).encode()
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        for name, data in [*layers.items(), ("c0ffee.json", config), ("manifest.json", manifest)]:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        if link:
            info = tarfile.TarInfo(link[0])
            info.type, info.linkname = tarfile.SYMTYPE, link[1]
            tar.addfile(info)
    return out.getvalue()


# A client whose save writes $ARCHIVE and whose load stops at once, reading nothing.
STOPPING_LOAD = """#!/bin/sh
case "$1 $2" in
  "image inspect") echo '[{"Id": "sha256:%s"}]' ;;
  "save "*) cat "$ARCHIVE" ;;
  "load "*) echo 'Error processing tar file(exit status 1): no space left on device' >&2; exit 1 ;;
esac
""" % ("0" * 64)


def test_an_engine_that_stops_loading_is_named_not_the_save_it_reads(tmp_path, monkeypatch):
    """A layer larger than the pipe meets a docker load that has gone: the error is the
    load's own line, not a failed read of the docker save the layer came from."""
    from kit.image import engine

    archive = tmp_path / "saved.tar"
    archive.write_bytes(saved_archive({"aa/layer.tar": layer(EPOCH, b"x" * (4 << 20))},
                                      ["aa/layer.tar"], None))  # fmt: skip
    client = tmp_path / "docker"
    client.write_text(STOPPING_LOAD)
    client.chmod(0o755)
    monkeypatch.setenv("KIT_DOCKER", str(client))
    monkeypatch.setenv("KIT_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("ARCHIVE", str(archive))
    engine.docker.cache_clear()
    try:
        with pytest.raises(KitError) as said:
            reproducible.rewrite("raw", "kit/x:1", EPOCH)
    finally:
        engine.docker.cache_clear()
    assert str(said.value) == (
        "docker load of the reproducible kit/x:1 failed: "
        "Error processing tar file(exit status 1): no space left on device"
    )
    assert not list((tmp_path / "cache" / "tmp").iterdir())  # the layer's scratch file went


def test_a_saved_image_is_read_in_its_manifests_order_with_linked_layers():
    archive = saved_archive(
        {"aa/layer.tar": layer(EPOCH), "bb/layer.tar": layer(EPOCH, b"x")},
        ["bb/layer.tar", "aa/layer.tar", "cc/layer.tar"],
        ("cc/layer.tar", "../aa/layer.tar"),
    )
    config, seen = reproducible.read_saved(io.BytesIO(archive), lambda f, i: (i, len(f.read())))
    assert config == {"config": {}, "history": []}
    assert [i for i, _ in seen] == [1, 0, 0]


def test_a_saved_image_without_its_manifest_is_one_line():
    archive = saved_archive({"aa/layer.tar": layer(EPOCH)}, ["aa/layer.tar"], None)
    broken = archive.replace(b"manifest.json", b"manifest.jsox")
    with pytest.raises(KitError, match="'docker save' wrote no image kit can read"):
        reproducible.read_saved(io.BytesIO(broken), lambda f, i: None)


def tree(*layers: bytes) -> dict[str, verify.Entry]:
    return verify.flatten([verify.read_layer(io.BytesIO(raw)) for raw in layers])


def test_layers_apply_in_order_with_whiteouts_and_opaque_folders():
    lower = tar_of(
        [
            ("etc", tarfile.DIRTYPE, None, 0o755, EPOCH),
            ("etc/a", tarfile.REGTYPE, b"a", 0o644, EPOCH),
            ("etc/b", tarfile.REGTYPE, b"b", 0o644, EPOCH),
            ("var", tarfile.DIRTYPE, None, 0o755, EPOCH),
            ("var/log", tarfile.DIRTYPE, None, 0o755, EPOCH),
            ("var/log/x", tarfile.REGTYPE, b"x", 0o644, EPOCH),
        ]
    )
    upper = tar_of(
        [
            ("etc/.wh.a", tarfile.REGTYPE, b"", 0o644, EPOCH),
            ("var/log/.wh..wh..opq", tarfile.REGTYPE, b"", 0o644, EPOCH),
            ("var/log/y", tarfile.REGTYPE, b"y", 0o644, EPOCH),
        ]
    )
    assert sorted(tree(lower, upper)) == ["etc", "etc/b", "var", "var/log", "var/log/y"]


def test_verify_names_a_changed_file_a_changed_mode_a_new_file_and_dates_alone():
    image = tree(layer(EPOCH))
    rebuilt = tree(
        layer(EPOCH, content=b"print(2)\n", mode=0o600),
        tar_of([("opt/old.txt", tarfile.REGTYPE, b"from a .deb\n", 0o644, 1700000000)]),
        tar_of([("opt/new", tarfile.REGTYPE, b"", 0o644, EPOCH)]),
    )
    assert verify.differences(image, rebuilt) == {
        "only in the rebuild": ["opt/new"],
        "content": ["opt/a.py"],
        "mode": ["opt/a.py"],
        "mtime": ["opt/old.txt"],
    }
    assert verify.differences(image, tree(layer(EPOCH))) == {}


def test_a_verdict_lists_each_kind_with_its_paths_and_the_config_fields():
    v = verify.Verdict(
        "kit/x:1-cpu",
        "sha256:" + "a" * 64,
        "kit-verify/x:1-cpu",
        "sha256:" + "b" * 64,
        {"content": [f"f{i}" for i in range(3)], "mode": ["g"]},
        ["config.Labels", "created"],
    )
    assert list(verify.lines(v, limit=2)) == [
        "NOT reproduced: kit/x:1-cpu is sha256:aaaaaaaaaaaa, "
        "kit-verify/x:1-cpu is sha256:bbbbbbbbbbbb",
        "  content: 3 path(s)",
        "    /f0",
        "    /f1",
        "    ... and 1 more (--all lists every one)",
        "  mode: 1 path(s)",
        "    /g",
        "  config fields: config.Labels, created",
    ]
    assert not v.reproduced
    assert verify.config_differences({"created": 1, "config": {"Env": [1]}}, {"created": 1}) == [
        "config.Env"
    ]


def test_kit_verify_exits_1_with_the_differences_as_json(kit_root, tmp_path, monkeypatch, capsys):
    from kit import cli
    from kit.image import convert

    differs = verify.Verdict("kit/x", "sha256:aa", "REF", "sha256:bb", {"mode": ["etc/x"]}, [])
    monkeypatch.setattr(verify, "compare", lambda image, other: differs)
    monkeypatch.setattr(
        convert, "artifacts", lambda r, v: convert.Artifacts("sha256:aa", tmp_path / "aa")
    )
    with pytest.raises(SystemExit) as e:
        cli.main(["verify", "mini-openmpi", "--against", "REF", "--json"])
    assert e.value.code == 1
    said = json.loads(capsys.readouterr().out)
    assert said["reproduced"] is False and said["differences"] == {"mode": ["etc/x"]}
    kept = json.loads((tmp_path / "aa" / "manifest.json").read_text())["verified"]
    assert (kept["against"], kept["reproduced"], kept["digest"]) == ("REF", False, "sha256:bb")


def go_mode(raw: bytes, mode: int) -> bytes:
    """The tar with its first entry's mode field as Go's writer (the engine's) fills it,
    the type's bits included, which Python's tarfile never writes."""
    head = bytearray(raw[:512])
    head[100:108] = b"%07o\0" % mode
    head[148:156] = b" " * 8
    head[148:156] = b"%06o\0 " % sum(head)
    return bytes(head) + raw[512:]


def test_a_mode_is_compared_by_its_permission_bits_whoever_wrote_the_tar():
    """A rebuilt image's layers are Python's, an image from a registry's the engine's:
    a directory's 0o40755 there is the 0o755 here."""
    ours = tar_of([("etc", tarfile.DIRTYPE, None, 0o755, EPOCH)])
    go = go_mode(ours, 0o40755)
    with tarfile.open(fileobj=io.BytesIO(go)) as tar:
        assert tar.next().mode == 0o40755
    assert verify.differences(tree(go), tree(ours)) == {}
    setuid = go_mode(ours, 0o44755)
    assert verify.differences(tree(setuid), tree(ours)) == {"mode": ["etc"]}


def test_a_verdict_filed_beside_an_image_is_read_back_by_its_digest(tmp_path, monkeypatch):
    """kit verify files its verdict in the image's manifest; each trial's record reads it
    by the digest it ran, and an image rebuilt since (another digest) has none."""
    monkeypatch.setenv("KIT_CACHE", str(tmp_path))
    digest = "sha256:" + "7a62792d219a" * 5 + "abcd"
    manifest = tmp_path / "images" / "pytorch-mpich" / "7a62792d219a7a62" / "manifest.json"
    manifest.parent.mkdir(parents=True)
    manifest.write_text(json.dumps({"digest": digest}))
    same = verify.Verdict("kit/x", digest, "kit-verify/x", digest, {}, [])
    verify.record(manifest, same, "a rebuild with no cache", "ab" * 32)
    held = verify.filed("pytorch-mpich", digest)
    assert held is not None and held["reproduced"] is True
    assert (held["against"], held["lock"]) == ("a rebuild with no cache", "ab" * 32)
    assert verify.filed("pytorch-mpich", "sha256:" + "7a62792d219a" * 5 + "0000") is None
    assert verify.filed("pytorch-mpich", "native-env-1") is None
