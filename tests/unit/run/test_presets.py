"""Presets: their exact expansion into campaigns, and published figures beside ours."""

import dataclasses
import json
import random
from pathlib import Path

import pytest

from kit import cli
from kit.analysis import summary
from kit.analysis.findings import Analysis
from kit.core.errors import KitError
from kit.report import published, writers
from kit.results import store
from kit.run import options, preset_run, presets, request, start
from kit.run.checks import RunRequest

from ..records import record

RESNETS = "resnet50,resnet101,resnet152"
SMALL = {
    "nchc2019-runtimes": [
        "run horovod-mpich --runtime native,docker,singularity --bench tf-cnn --model resnet50 "
        "--batch-size 4 --steps 3 --warmup-steps 1 --min-time 2 --precision 4% --budget 25m "
        "--baseline all "
        "--out OUT/tf-resnet50"
    ],
    "cscs2017-inception3": [
        "run horovod-mpich --runtime docker --bench tf-cnn --model inception3 --batch-size 2 "
        "--np 1,2 --data synthetic,real --repeats 6 --warmup-trials 1 --steps 3 "
        "--warmup-steps 1 --out OUT/tf-inception3"
    ],
    "nchc2019-horovod-vs-ps": [
        "run horovod-mpich --runtime docker --bench tf-cnn,tf-ps --model resnet50 --batch-size 4 "
        "--np 1,2 --repeats 6 --warmup-trials 1 --steps 3 --warmup-steps 1 --out OUT/tf-resnet50",
        *(
            f"run {image} --runtime docker --bench {bench} --model resnet50 --batch-size 4 "
            f"--np 1,2 --repeats 4 --warmup-trials 1 --steps 3 --warmup-steps 1 --out OUT/{leg}"
            for leg, image, bench in (
                ("torch-ddp", "pytorch2-mpich", "torch-cnn"),
                ("tf-mwms", "tf2-mpich", "tf-mwms"),
            )
        ),
    ],
    "bnl2018-horovod-vs-ps": [
        "run horovod-mpich --runtime docker --bench tf-cnn,tf-ps --model alexnet --batch-size 8 "
        "--np 1,2 --repeats 4 --warmup-trials 0 --steps 20 --warmup-steps 2 "
        "--bench-arg=--task=accuracy --out OUT/tf-alexnet"
    ],
    "osu2018-grpc": [
        "run horovod-mpich --runtime docker --bench grpc,mpi --np 2 --repeats 6 --warmup-trials 1 "
        "--out OUT/grpc-and-mpi"
    ],
    "cscs2018-frameworks": [
        f"run {image} --runtime {rt} --bench {bench} --model {models} "
        f"--batch-size 2,4 --repeats {n} --warmup-trials 0 --steps 2 --warmup-steps 1 "
        f"--out OUT/{leg}"
        for leg, image, rt, bench, models, n in (
            ("tensorflow", "horovod-mpich", "docker", "tf-cnn", RESNETS, 2),
            ("pytorch", "pytorch-mpich", "docker", "torch-cnn", RESNETS, 3),
            (
                "pytorch-shifter",
                "pytorch-mpich",
                "podman-hpc,charliecloud",
                "torch-cnn",
                "resnet50",
                3,
            ),
            ("caffe2", "caffe2-mpich", "docker", "caffe2-cnn", RESNETS, 3),
            ("pytorch2", "pytorch2-mpich", "docker", "torch-cnn", RESNETS, 2),
            ("tensorflow2", "tf2-mpich", "docker", "tf-mwms", RESNETS, 2),
        )
    ],
}


def figures(name: str) -> list[dict]:
    """A preset's published figures as its run saves them in preset.json."""
    return dataclasses.asdict(presets.load(name))["published"]


@pytest.mark.parametrize("name", sorted(SMALL))
def test_preset_expands_to_exactly_these_campaigns(name, tmp_path):
    p = presets.load(name)
    got = [" ".join(presets.argv(p, leg, tmp_path, full=False)) for leg in p.legs]
    assert got == [x.replace("OUT", str(tmp_path)) for x in SMALL[name]]
    for leg in p.legs:
        assert "--variant" in leg.full and "cuda" in leg.full  # the papers ran on GPUs
        assert leg.full[:2] == ["--launcher", "slurm"]  # on a cluster


def test_a_resumed_preset_continues_the_legs_it_started_and_starts_the_rest(tmp_path):
    p = presets.load("cscs2018-frameworks")
    first, second = p.legs[0], p.legs[1]
    (tmp_path / first.name).mkdir()
    (tmp_path / first.name / store.SPEC_FILE).write_text("{}")
    assert presets.argv(p, first, tmp_path, False, resume=True)[-1] == "--resume"
    assert "--resume" not in presets.argv(p, second, tmp_path, False, resume=True)
    dry = presets.argv(p, first, tmp_path, False, dry_run=True, resume=True)
    assert dry[-1] == "--dry-run" and "--resume" not in dry


@pytest.mark.usefixtures("host_tools")
def test_every_preset_lists_and_plans(capsys):
    """`kit presets` lists each; every leg (both sizes) passes kit run's own checks."""
    assert cli.main(["presets"]) == 0
    listed = capsys.readouterr().out
    assert set(SMALL) <= set(presets.names())
    for name in presets.names():
        p = presets.load(name)
        assert f"{name}  ~{p.minutes} min here  {p.title}" in listed
        for leg in p.legs:
            for args in (leg.args, leg.full, *([leg.hosts] if leg.hosts else [])):
                assert cli.main(["run", leg.image, *args, "--dry-run"]) == 0, (name, args)
    capsys.readouterr()


GRPC = presets.folder() / "osu2018-grpc.toml"


@pytest.mark.parametrize(
    ("edit", "said"),
    [
        (('name = "grpc-and-mpi"', 'name = "../../elsewhere"'),
         "leg name '../../elsewhere' is not a folder's name (it must match "),
        (("minutes = 2", "minutes = inf"), "minutes inf is not a whole number above 0"),
        (('measure = { kind = "elsewhere", why = "it compares an RDMA transport with TCP; '
          'here gRPC runs over TCP only (no InfiniBand, no AR-gRPC)" }', 'measure = "ratio"'),
         "published 'RDMA gRPC (AR-gRPC) point-to-point bandwidth over gRPC on IPoIB and "
         "Ethernet' has no measure kind (ratio, "),
        (('kind = "elsewhere", why', 'kind = "ratio", why'),
         "Ethernet': a ratio measure names arm, over"),
        (('args = ["--runtime"', 'args = [2, "--runtime"'),
         "leg grpc-and-mpi: args is missing or not a list of texts"),
        (("[[published]]", '[[leg]]\nname = "grpc-and-mpi"\nimage = "x"\nargs = []\nfull = []'
          "\n\n[[published]]"), "two legs have one name"),
    ],
)  # fmt: skip
def test_a_preset_file_edited_by_hand_is_one_line_naming_what_is_wrong(
    edit, said, tmp_path, monkeypatch, capsys
):
    """A leg named as a path put its results outside the preset's folder; minutes = inf
    (an OverflowError), a measure that is no table (an AttributeError) or a list of
    numbers for args were tracebacks; a measure lacking what its kind reads failed in the
    report; two legs of one name shared one folder."""
    folder = tmp_path / "recipes" / "presets"
    folder.mkdir(parents=True)
    text = GRPC.read_text()
    assert edit[0] in text
    (folder / "osu2018-grpc.toml").write_text(text.replace(edit[0], edit[1], 1))
    monkeypatch.setenv("KIT_ROOT", str(tmp_path))
    assert cli.main(["presets"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"kit: error: preset {folder}/osu2018-grpc.toml: ") and said in err
    assert err.endswith("; compare it with the others\n") and err.count("\n") == 1


@pytest.mark.parametrize(
    ("edit", "said"),
    [
        (lambda p: p["legs"][0].update(name=5), "leg name 5 is not a folder's name"),
        (lambda p: p["legs"][0].update(name="../elsewhere"), "leg name '../elsewhere' is not "),
        (lambda p: p["published"][0].pop("measure"), "has no measure kind"),
        (lambda p: p["published"][0]["measure"].update(kind=[1]), "has no measure kind"),
        (lambda p: p["published"][0].update(value=[1]), "value is neither a finite number"),
        (lambda p: p.update(baseline=["native"]), "baseline is missing or not a text"),
    ],
)
def test_a_preset_json_edited_by_hand_is_one_line_naming_what_is_wrong(edit, said, tmp_path):
    """A leg named 5 was a TypeError traceback; one named ../elsewhere reported the trials of
    a folder outside the preset's; a figure without its measure was a KeyError traceback."""
    out = tmp_path / "preset"
    presets.save(presets.load("osu2018-grpc"), out, full=False)
    (tmp_path / "elsewhere").mkdir()
    for i in range(4):
        store.append(out / "grpc-and-mpi", record("docker", 5.0, index=i))
        store.append(tmp_path / "elsewhere", record("docker", 5.0, index=i))
    saved = json.loads((out / store.PRESET_FILE).read_text())
    edit(saved)
    (out / store.PRESET_FILE).write_text(json.dumps(saved))
    with pytest.raises(KitError) as e:
        writers.write([out], "md", 0.95, False)
    assert str(e.value).startswith(f"{out / store.PRESET_FILE} is not what a preset's run saves")
    assert said in str(e.value) and str(e.value).endswith("; run it again")


def test_a_host_list_runs_the_legs_that_say_how_across_nodes_a_second_time(tmp_path, capsys):
    """--hosts adds LEG-nodes runs (the leg's `hosts` options over the list); the report
    finds their folders; where a preset cannot go, one line."""
    p = presets.load("nchc2019-horovod-vs-ps")
    legs = ["tf-resnet50", "torch-ddp", "tf-mwms"]
    assert [x.name for x in presets.legs(p, across=False)] == legs
    nodes = presets.legs(p, across=True)[3:]
    assert [x.name for x in nodes] == ["tf-resnet50-nodes", "torch-ddp-nodes"]
    where = {"hosts": "n1,n2"}
    assert " ".join(presets.argv(p, nodes[1], tmp_path, False, where=where)) == (
        "run pytorch2-mpich --runtime native,singularity,charliecloud --bench torch-cnn "
        "--model resnet50 --batch-size 4 --np 1,2 --repeats 4 --warmup-trials 1 --steps 3 "
        f"--warmup-steps 1 --hosts n1,n2 --out {tmp_path}/torch-ddp-nodes"
    )
    presets.save(p, tmp_path, full=False)
    store.append(tmp_path / "torch-ddp-nodes", record("native", 9.0))
    assert published.expand([tmp_path])[0] == [tmp_path / "torch-ddp-nodes"]
    for args, said in (
        (["--hosts", "n1,n2", "--full"], "--full runs the study's sizes as Slurm jobs, not over"),
        (["--hostfile", "h.txt"], "preset osu2018-grpc has no leg that runs across nodes"),
        (["--slurm-config", "s.toml"], "--slurm-config goes with --full, whose legs are Slurm"),
    ):
        name = "osu2018-grpc" if "--hostfile" in args else "nchc2019-horovod-vs-ps"
        assert cli.main(["run", "--preset", name, *args, "--out", str(tmp_path / "x")]) == 2
        assert f"kit: error: {said}" in capsys.readouterr().err


def test_a_scaling_claim_is_read_from_the_run_over_the_most_nodes(tmp_path):
    """CSCS's 2-node efficiency: the singularity run over two hosts, not docker's on one."""
    rng = random.Random(5)
    for i in range(8):
        for rt, ranks, hosts, rate in (
            ("docker", 1, ["h"], 10.0), ("docker", 2, ["h"], 12.0),
            ("singularity", 1, ["n1"], 10.0), ("singularity", 2, ["n1", "n2"], 19.15),
        ):  # fmt: skip
            rec = record(rt, rng.gauss(rate, 0.05), ranks=ranks, index=i)
            rec |= {"model": "inception3", "bench": "tf-cnn", "image": "horovod-mpich"}
            if len(hosts) > 1 or rt == "singularity":
                rec |= {"launcher": "mpirun over ssh", "host_list": ["n1", "n2"]}
            rec["result"]["hosts"] = hosts
            store.append(tmp_path, rec)
    rows = published.published(summary.analyse([tmp_path]), figures("cscs2017-inception3"))
    assert rows[0]["measured"].startswith("0.9") and rows[0]["measured"].endswith(
        "(singularity, 2 nodes)"
    )
    assert rows[0]["finding"] == "agrees: the published figure is inside the measured interval"


def test_preset_options_are_its_own(capsys):
    assert cli.main(["run", "--preset", "nope"]) == 2
    assert "no preset 'nope' (known: bnl2018-horovod-vs-ps, cscs2017-inception3," in (
        capsys.readouterr().err
    )
    assert cli.main(["run", "--preset", "../presets/nchc2019-runtimes", "--dry-run"]) == 2
    assert "no preset '../presets/nchc2019-runtimes' (known: " in capsys.readouterr().err
    assert cli.main(["run", "--preset", "nchc2019-runtimes", "--model", "resnet50"]) == 2
    assert "sets the campaign's options; drop --model" in capsys.readouterr().err
    assert cli.main(["run", "pytorch-mpich", "--preset", "nchc2019-runtimes"]) == 2
    assert "names its own images; drop 'pytorch-mpich'" in capsys.readouterr().err
    assert cli.main(["run", "pytorch-mpich", "--full"]) == 2
    assert "--full goes with --preset NAME" in capsys.readouterr().err
    # the host list's option as given: --hostfile /dev/zero was told to drop --hosts
    assert cli.main(["run", "--preset", "nchc2019-runtimes", "--hostfile", "/dev/zero"]) == 2
    assert capsys.readouterr().err == (
        "kit: error: preset nchc2019-runtimes has no leg that runs across nodes; drop --hostfile\n"
    )


def runtimes_campaign(out, singularity_over_docker: float, noise: float, rounds: int = 10):
    rng = random.Random(11)
    leg = out / "tf-resnet50"
    for r in range(rounds):
        for i, (rt, rate) in enumerate(
            (("native", 10.0), ("docker", 10.0), ("singularity", 10.0 * singularity_over_docker))
        ):
            rec = record(rt, rng.gauss(rate, noise), repeat=r, index=3 * r + i)
            store.append(leg, rec | {"image": "horovod-mpich", "model": "resnet50"})


@pytest.mark.parametrize(
    ("ratio", "noise", "finding"),
    [
        (1.10, 0.05, "agrees: the published figure is inside the measured interval"),
        (1.00, 0.05, "disagrees: the published figure is outside the measured interval"),
        (1.05, 1.0, "cannot speak: the interval holds both the published figure and no effect"),
    ],
)
def test_published_figure_beside_the_measured_ratio(tmp_path, ratio, noise, finding):
    """The NCHC claim (Singularity 10 % faster than Docker) read against the measured
    Singularity / Docker interval of every-pair comparisons."""
    p = presets.load("nchc2019-runtimes")
    presets.save(p, tmp_path, full=False)
    runtimes_campaign(tmp_path, ratio, noise)
    path, text = writers.write([tmp_path], "md", 0.95, False)
    assert path == tmp_path / "report.md"
    assert "Preset nchc2019-runtimes: Native, Docker and Apptainer" in text
    assert "| runtime | over | ratio [CI] |" in text  # the preset's baseline: all pairs
    (row,) = [x for x in text.splitlines() if x.startswith("| Singularity faster than Docker")]
    cells = row.strip("| ").split(" | ")
    assert cells[1] == "10 percent" and cells[5] == finding


def test_oom_efficiency_and_io_findings(tmp_path):
    a = Analysis("x", 0, 0, [], 0, {}, 0.95, [], [], [], [], oom=[], runtimes={})
    p = figures("cscs2018-frameworks")
    rows = published.published(a, p)
    assert [r["finding"] for r in rows] == [
        "cannot speak: batch 128 was not run here (--full runs it)",
        "cannot speak: batch 64 was not run here (--full runs it)",
        "cannot speak: batch 32 was not run here (--full runs it)",
        *(
            f"cannot speak: no ratio measured for arm={rt}, over=native, model=resnet50, "
            "image=pytorch-mpich"
            for rt in ("podman-hpc", "charliecloud")
        ),
    ]
    a.oom = [
        {"image": "pytorch-mpich", "bench": "torch-cnn", "model": "resnet101", "batch_size": 64,
         "ranks": 1, "runtime": "docker", "trials": 3}
    ]  # fmt: skip
    assert published.published(a, p)[1]["finding"] == "agrees: it did not fit here either"
    a.oom[0]["image"] = "pytorch2-mpich"  # today's PyTorch, in the same preset's own leg
    assert published.published(a, p)[1]["finding"].startswith("cannot speak: batch 64 was not")
    inception = published.published(a, figures("cscs2017-inception3"))
    assert inception[0]["finding"] == (
        "cannot speak: no efficiency measured for model=inception3, ranks=2, "
        "data=synthetic, runtime=docker,singularity"
    )


def test_a_preset_folder_without_trials_is_a_clear_error(tmp_path):
    presets.save(presets.load("cscs2017-inception3"), tmp_path, full=False)
    with pytest.raises(KitError, match=r"no leg of preset cscs2017-inception3 in .* has trials"):
        writers.write([tmp_path], "md", 0.95, False)


def test_horovod_over_ps_and_figure_only_claims(tmp_path):
    """A benchmark-over-benchmark ratio (tf-cnn over tf-ps, same ranks and runtime); a
    claim with no figure is shown, not judged; a comparison this machine cannot make
    says why."""
    rng = random.Random(3)
    for i in range(8):
        for bench, rate in (("tf-cnn", 11.7), ("tf-ps", 10.0)):
            for ranks in (1, 2):
                rec = record("docker", rng.gauss(rate * ranks, 0.05), ranks=ranks, index=i)
                store.append(tmp_path, rec | {"bench": bench, "model": "resnet50"})
    a = summary.analyse([tmp_path])
    (row,) = published.published(a, figures("nchc2019-horovod-vs-ps"))
    assert row["measured"].startswith("1.17") and row["finding"].startswith("agrees")
    rows = published.published(a, figures("bnl2018-horovod-vs-ps"))
    assert [r["published"] for r in rows] == ["nearly linear", "poor"]
    assert {r["finding"] for r in rows} == {"cannot speak: no efficiency measured for "
        "model=alexnet, ranks=2, runtime=docker, bench=tf-cnn", "cannot speak: no efficiency "
        "measured for model=alexnet, ranks=2, runtime=docker, bench=tf-ps"}  # fmt: skip
    for r in tmp_path.iterdir():
        r.unlink()
    for i in range(8):
        for ranks in (1, 2):
            rec = record("docker", rng.gauss(100 * ranks * 0.9 ** (ranks - 1), 0.5), ranks=ranks)
            store.append(tmp_path, rec | {"bench": "tf-ps", "model": "alexnet", "index": i})
    poor = published.published(summary.analyse([tmp_path]), figures("bnl2018-horovod-vs-ps"))
    assert poor[1]["measured"].startswith("0.90") and poor[1]["finding"] == (
        "no figure published (figure-only): the measured value is for the reader"
    )
    osu = published.published(a, figures("osu2018-grpc"))
    assert osu[0]["finding"] == (
        "cannot speak: it compares an RDMA transport with TCP; here gRPC runs over TCP only "
        "(no InfiniBand, no AR-gRPC)"
    )


def test_a_legs_request_is_its_kit_run_line(tmp_path):
    """The request a leg runs as is what its shown `kit run` line parses to, for every
    preset, both sizes, across nodes, dry run and resume."""
    (tmp_path / "tf-resnet50").mkdir()
    (tmp_path / "tf-resnet50" / store.SPEC_FILE).write_text("{}")  # started: resumed
    for name in presets.names():
        p = presets.load(name)
        for full in (False, True):
            for leg in presets.legs(p, across=not full):
                where = {"hosts": "n1,n2"} if leg.across else {"slurm_config": Path("s.toml")}
                for how in ({}, {"dry_run": True}, {"resume": True}, {"where": where}):
                    args = presets.argv(p, leg, tmp_path, full, **how)
                    got = presets.request(p, leg, tmp_path, full, **how)
                    assert RunRequest.parse(args[1:]) == got, (name, leg.name, how)


def test_a_leg_that_sets_the_preset_runs_options_is_named(tmp_path):
    p = presets.load("osu2018-grpc")
    leg = dataclasses.replace(p.legs[0], args=[*p.legs[0].args, "--out", "elsewhere"])
    with pytest.raises(KitError, match=r"^preset osu2018-grpc, leg grpc-and-mpi: --out is the "):
        presets.request(p, leg, tmp_path, False)
    leg = dataclasses.replace(p.legs[0], args=["--repeats", "many"])
    with pytest.raises(KitError, match="argument --repeats: invalid int value: 'many'; compare"):
        presets.request(p, leg, tmp_path, False)


def test_every_campaign_option_is_the_presets_to_set():
    """Read from the options table: a preset refuses each option its legs set, by its
    flag, and takes the run's own (--out, --dry-run, ...) and where its legs run."""
    value = {int: "123457", float: "0.625"}
    name = "nchc2019-horovod-vs-ps"
    for o in options.scoped(options.CAMPAIGN, options.KIT_BENCH, options.COMMAND):
        if not o.flags:
            continue  # IMAGE: "names its own images"
        given = [o.flag] if o.action == "store_true" else [o.flag, value.get(o.type, "x")]
        with pytest.raises(KitError, match=f"^--preset {name} sets the .*; drop {o.flag}$"):
            preset_run.check(RunRequest.parse(["--preset", name, *given]))
    q = RunRequest.parse(["--preset", name, "--hosts", "n1", "--out", "o", "--resume"])
    assert preset_run.check(q).name == name


@pytest.mark.parametrize("dry_run", [False, True])
def test_a_preset_runs_each_leg_as_its_request_then_its_report(
    dry_run, tmp_path, monkeypatch, capsys
):
    """Every leg checked first; then each a campaign of its own, said first; then the
    report, with preset.json saved (a dry run saves nothing and reports nothing)."""
    checked, ran, reported = [], [], []

    def check(r: RunRequest) -> RunRequest:
        assert not ran, "a leg checked after the first ran"
        checked.append(r)
        return r  # the campaign each leg runs is the one its check gave

    def run(r: RunRequest, c: RunRequest) -> None:
        assert c is r
        ran.append(r)

    monkeypatch.setattr(request, "check", check)
    monkeypatch.setattr(start, "run", run)
    out = tmp_path / "out"
    argv = ["--preset", "nchc2019-horovod-vs-ps", "--hosts", "n1,n2", "--out", str(out)]
    q = RunRequest.parse([*argv, *(["--dry-run"] if dry_run else [])])
    preset_run.run(q, reported.append)
    p = presets.load("nchc2019-horovod-vs-ps")
    legs = presets.legs(p, across=True)
    hosts = {"hosts": "n1,n2"}
    assert ran == [
        presets.request(p, leg, out, False, where=hosts if leg.across else {}, dry_run=dry_run)
        for leg in legs
    ]
    assert checked == ran and [r.out for r in ran] == [out / leg.name for leg in legs]
    said = capsys.readouterr().err.splitlines()
    dry = " --dry-run" if dry_run else ""
    first = f"==> nchc2019-horovod-vs-ps 1/5: kit run horovod-mpich {' '.join(p.legs[0].args)}"
    assert said[0] == f"{first} --out {out}/tf-resnet50{dry}"
    assert said[4].endswith(f"--hosts n1,n2 --out {out}/torch-ddp-nodes{dry}")
    if dry_run:
        assert reported == [] and not out.exists()
    else:
        assert reported == [out] and store.saved_preset(out)["name"] == p.name
