"""The measured timeline without a GPU: the timeline build compiles, the normal build is untouched,
stamps decode into the right intervals; and on a Hopper GPU, the tool measures step 8."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from conftest import REPO, build_step, gpu_arch
from grader.core import build
from grader.analysis import instrument, locator, timeline
from grader.commands import timeline as timeline_command
from grader.core.steps import DEFAULT_SM_COUNT, STEPS

sys.path.insert(0, str(REPO / "notebooks"))
import figures  # noqa: E402


def _shape(number: int):
    return STEPS["hopper"][number].correctness_shapes[1]  # a few tiles, 3 K tiles


def _timeline_build(number: int, address: int = 0x7F0000000000) -> timeline.TimelineBuild:
    spec = STEPS["hopper"][number]
    factory = build.kernel_factory(REPO / "solutions", "hopper", spec)
    return timeline.build_timeline(factory, spec, _shape(number), "sm_90a", DEFAULT_SM_COUNT["sm_90a"], address)


@pytest.mark.parametrize("number", [5, 7, 8, 10])
def test_the_timeline_build_compiles_for_sm_90a(number):
    built = _timeline_build(number)
    assert instrument.compile_cubin(built.cuda_source, "sm_90a")
    assert built.sites["wait_begin"] == built.sites["wait_end"] >= 1
    assert built.sites["arrive_expect_tx"] >= 1 and built.sites["store"] >= 1
    if number >= 7:  # a producer, and consumers that release stages
        assert built.sites["arrive"] >= 1
        assert "producer" in built.roles.values()


def test_step_8_stamps_every_wait_arrive_and_store_and_knows_its_roles(tmp_path):
    built = _timeline_build(8)
    assert built.sites == {"wait_begin": 2, "wait_end": 2, "arrive": 2, "arrive_expect_tx": 1, "store": 1}
    assert built.roles == {0: "producer", 4: "consumer", 5: "consumer", 6: "consumer", 7: "consumer"}
    assert [b.index for b in built.barriers] == [0, 1, 2, 3, 4, 5] * 2
    # after the preprocessor, each site is its helper call plus its stamps (a wait: two)
    source = tmp_path / "kernel.cu"
    source.write_text(built.cuda_source)
    done = subprocess.run([build._tool("nvcc"), "-E", "-arch=sm_90a", "-w", str(source)],
                          capture_output=True, text=True, check=True)
    kernel = done.stdout[done.stdout.index("kernel_kernel("):]
    assert len(re.findall(r"\btirx_timeline_stamp\(", kernel)) == sum(built.sites.values())


def test_step_10_has_two_consumers_and_stamps_its_remote_arrives():
    built = _timeline_build(10)
    assert built.roles == {0: "producer", **{w: "consumer 0" for w in range(4, 8)},
                           **{w: "consumer 1" for w in range(8, 12)}}
    helpers = {h.name: h for h in timeline.stamped_helpers(built.plain_source)}
    remote = [h for h in helpers.values() if h.cluster_address]
    assert remote and all(h.kind == "arrive" for h in remote)


def test_the_normal_build_is_unchanged_by_the_timeline():
    before = build_step(REPO / "solutions", "hopper", 8, shape=_shape(8))
    built = _timeline_build(8)
    after = build_step(REPO / "solutions", "hopper", 8, shape=_shape(8))
    assert (after.cuda_source, after.sass) == (before.cuda_source, before.sass)
    assert "tirx_timeline" not in after.cuda_source
    assert built.plain_source == before.cuda_source != built.cuda_source


def test_the_hook_is_removed_even_when_the_build_fails():
    import tvm_ffi

    with pytest.raises(ZeroDivisionError):
        with instrument.cuda_postproc(lambda code: code):
            raise ZeroDivisionError
    assert tvm_ffi.get_global_func(instrument.HOOK, allow_missing=True) is None


# ---- a synthetic run: 2 stages, 2 output tiles of 2 K tiles -----------------------------------------

FULL, EMPTY = (0, 8), (16, 24)
BARRIERS = [locator.Barrier("tma2mma", s, FULL[s], 1, ()) for s in (0, 1)] + [
    locator.Barrier("mma2tma", s, EMPTY[s], 1, ()) for s in (0, 1)
]
ROLES = {0: "producer", 4: "consumer", 5: "consumer", 6: "consumer", 7: "consumer"}


def _stamp(kind, warp, t, offset=0, rank=0):
    # a 1.5 GHz clock, and a %globaltimer that agrees with it (both start anywhere)
    return timeline.Stamp(kind, warp, offset, rank, 0, 100, 10**9 + t, 7_000 + int(t * 1.5))


def _wait(warp, offset, begin, end):
    return [_stamp("wait_begin", warp, begin, offset), _stamp("wait_end", warp, end, offset)]


def _synthetic_run() -> list[timeline.Stamp]:
    producer = (
        _wait(0, EMPTY[0], 0, 10) + [_stamp("arrive_expect_tx", 0, 20, FULL[0])]
        + _wait(0, EMPTY[1], 30, 40) + [_stamp("arrive_expect_tx", 0, 50, FULL[1])]
        + _wait(0, EMPTY[0], 60, 400) + [_stamp("arrive_expect_tx", 0, 410, FULL[0])]
        + _wait(0, EMPTY[1], 420, 700) + [_stamp("arrive_expect_tx", 0, 710, FULL[1])]
    )
    consumer = (
        _wait(4, FULL[0], 6, 300) + _wait(4, FULL[1], 310, 350)
        + [_stamp("arrive", 4, 390, EMPTY[0]), _stamp("arrive", 4, 392, EMPTY[0], rank=1)]  # and the peer CTA's
        + [_stamp("arrive", 4, 600, EMPTY[1]), _stamp("store", 4, 620), _stamp("store", 4, 650)]
        + _wait(4, FULL[0], 660, 670) + _wait(4, FULL[1], 680, 900)
        + [_stamp("arrive", 4, 950, EMPTY[0]), _stamp("arrive", 4, 1000, EMPTY[1]), _stamp("store", 4, 1100)]
    )
    other_warp = _wait(5, FULL[0], 7, 301) + _wait(5, FULL[1], 311, 351)  # warps 5-7 wait too: one is shown
    return sorted(producer + consumer + other_warp, key=lambda s: s.clock)


def _spans(events):
    return sorted((role, what, stage, round(b), round(e)) for role, what, stage, b, e in figures.intervals(events))


def test_stamps_decode_into_the_intervals_of_the_run():
    stamps, overflowed = timeline.decode(timeline.encode(_synthetic_run()))
    assert stamps == _synthetic_run() and not overflowed
    times, timer = timeline.times_ns(stamps)
    assert timer.startswith("%clock64 fitted to %globaltimer (1.500 GHz")
    spans = _spans(timeline.events(stamps, BARRIERS, ROLES, k_tiles=2, tiles=2))
    assert [s for s in spans if s[1] == "mma"] == [
        ("consumer", "mma", 0, 300, 390), ("consumer", "mma", 0, 670, 950),
        ("consumer", "mma", 1, 350, 600), ("consumer", "mma", 1, 900, 1000),
    ]
    assert [s for s in spans if s[1] == "epilogue"] == [
        ("consumer", "epilogue", None, 600, 650), ("consumer", "epilogue", None, 1000, 1100)]
    assert [s for s in spans if s[1] == "load"] == [
        ("stage 0: TMA", "load", 0, 20, 300), ("stage 0: TMA", "load", 0, 410, 670),
        ("stage 1: TMA", "load", 1, 50, 350), ("stage 1: TMA", "load", 1, 710, 900),
    ]
    assert [s for s in spans if s[:2] == ("producer", "wait")] == [
        ("producer", "wait", 0, 0, 10), ("producer", "wait", 0, 60, 400),
        ("producer", "wait", 1, 30, 40), ("producer", "wait", 1, 420, 700),
    ]
    assert [s for s in spans if s[:2] == ("consumer", "wait")] == [
        ("consumer", "wait", 0, 6, 300), ("consumer", "wait", 0, 660, 670),
        ("consumer", "wait", 1, 310, 350), ("consumer", "wait", 1, 680, 900),
    ]
    assert len(spans) == 18


def test_only_the_first_output_tiles_are_kept():
    spans = _spans(timeline.events(_synthetic_run(), BARRIERS, ROLES, k_tiles=2, tiles=1))
    assert {s[1] for s in spans} == {"wait", "mma", "load", "epilogue"}
    assert max(e for *_, e in spans) == 650
    assert len([s for s in spans if s[1] == "mma"]) == len([s for s in spans if s[1] == "load"]) == 2


def test_a_coarse_globaltimer_is_refined_by_the_clock_and_a_full_buffer_is_flagged():
    # %globaltimer in 1 us steps over a 200 us run; the clock at 1.755 GHz
    stamps = [timeline.Stamp("arrive", 4, 16, 0, 0, 1, (5_000_000 + t) // 1000 * 1000, int(t * 1.755))
              for t in range(0, 200_000, 37)]
    times, timer = timeline.times_ns(stamps)
    assert "1.75" in timer
    assert abs(times[1] - times[0] - 37) < 1 and abs(times[-1] - (len(stamps) - 1) * 37) < 1000
    words = timeline.encode(stamps[:3], capacity=3)
    words[0] = 1
    assert timeline.decode(words)[1]


def test_without_a_gpu_the_command_builds_and_says_what_it_would_record():
    if gpu_arch():
        pytest.skip("a GPU is here: the command runs the kernel")
    done = subprocess.run([sys.executable, "-m", "grader.commands.timeline", "--step", "8", "--shape", "256x384x192"],
                          cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "timeline build of step 8 (solutions/hopper) at 256x384x192 for sm_90a: built" in done.stdout
    assert "wait_begin at 2 sites" in done.stdout and "warp 0 producer" in done.stdout
    assert re.search(r"mma2tma\w*\[5\]\s+0x58\s+1", done.stdout)


@pytest.mark.parametrize("args", [
    ["--step", "x"], ["--step", "5"], ["--step", "8", "--track", "blackwell"], ["--step", "8", "--shape", "100x1x1"],
    ["--step", "8", "--tiles", "0"], ["--step", "8", "--impl", "mine"], ["--step", "8", "--bogus"], [],
])
def test_bad_options_say_so_in_one_line(args):
    done = subprocess.run([sys.executable, "-m", "grader.commands.timeline", *args], cwd=REPO, capture_output=True,
                          text=True)
    assert done.returncode == 2
    assert len(done.stderr.strip().splitlines()) == 1 and done.stderr.startswith("timeline: ")


@pytest.mark.gpu
@pytest.mark.skipif("gpu_arch() != 'sm_90a'", reason="the timeline covers the Hopper track")
def test_the_step_8_timeline_is_measured_on_the_gpu(tmp_path):
    out, png = tmp_path / "timeline.json", tmp_path / "timeline.png"
    done = subprocess.run(
        [sys.executable, "-m", "grader.commands.timeline", "--step", "8", "--shape", "512x512x1024", "--out", str(out),
         "--png", str(png)], cwd=REPO, capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    data = json.loads(out.read_text())
    assert data["check"] == "ok" and data["step"] == 8 and data["shape"] == [512, 512, 1024]
    assert not data["overflowed"] and data["gpu"] and data["command"].startswith("python -m grader.commands.timeline")
    spans = figures.intervals(figures.timeline_events(data))
    assert [s for s in spans if s[:2] == ("producer", "wait")]
    assert {s[2] for s in spans if s[:2] == ("consumer", "mma")} == set(range(6))
    assert len([s for s in spans if s[1] == "mma"]) == 16  # CTA 0 has one output tile of 16 K tiles
    assert {s[0] for s in spans if s[1] == "load"} == {f"stage {s}: TMA" for s in range(6)}
    assert [s for s in spans if s[1] == "epilogue"]
    assert all(end >= begin for *_, begin, end in spans)
    assert png.stat().st_size > 10_000


def test_the_notebook_cell_and_the_png_draw_a_file_the_tool_writes(tmp_path):
    """The JSON's format is the notebook's: its measured-timeline cell runs on a written file."""
    import matplotlib
    import nbformat

    matplotlib.use("Agg")
    data = timeline.document("NVIDIA H100 80GB HBM3", STEPS["hopper"][8], "solutions", (256, 256, 128), 2, "ok", 0.001,
                             _synthetic_run(), False, ROLES, BARRIERS)
    data = {"command": "python -m grader.commands.timeline --step 8", **data}
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "timeline-step08-h100.json").write_text(json.dumps(data))
    notebook = nbformat.read(REPO / "notebooks" / "07_08_warp_specialization_and_deeper_pipeline.ipynb", as_version=4)
    (cell,) = [c for c in notebook.cells if c.cell_type == "code" and "timeline-step08-h100.json" in c.source]
    exec(cell.source, {"figures": figures, "REPO": tmp_path, "print": lambda *a, **k: None})
    assert len(figures.intervals(figures.timeline_events(data))) == 18
    timeline_command.draw(data, tmp_path / "timeline.png")
    assert (tmp_path / "timeline.png").stat().st_size > 10_000
