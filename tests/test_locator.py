"""The deadlock locator without a GPU: the debug build compiles for every arch, the normal build is
untouched, the barrier map names the kernel's own barriers, records are decoded and grouped right."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys

import numpy as np
import pytest

from conftest import REPO, build_step, present_steps
from grader.core import build
from grader.analysis import locator
from grader.core.steps import DEFAULT_SM_COUNT, STEPS

SHAPE = (256, 384, 192)
ARCHS = {"hopper": ("sm_90a",), "blackwell": ("sm_100a", "sm_103a")}


def _debug_build(track: str, number: int, arch: str, tree=REPO / "solutions", address: int = 0x7F0000000000):
    spec = STEPS[track][number]
    factory = build.kernel_factory(tree, track, spec)
    return locator.build_debug(factory, spec, SHAPE, arch, DEFAULT_SM_COUNT[arch], address)


def _hung_module():
    spec = importlib.util.spec_from_file_location("hung_step", REPO / "tests" / "kernels" / "hung_step.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    "track,number,arch",
    [(track, number, arch) for track, number in present_steps("solutions") for arch in ARCHS[track]],
)
def test_the_debug_build_of_every_solution_compiles_for_its_arch(track, number, arch):
    debug = _debug_build(track, number, arch)
    assert locator.compile_cubin(debug.cuda_source, arch)
    plain = locator._strip_instrumentation(debug.cuda_source)
    waits = len(locator._CUDA_WAIT.findall(plain))
    assert waits == sum(len(b.wait_lines) for b in debug.barriers)
    if waits:  # every wait of the kernel goes through the bounded wait: no helper is left unmapped
        assert "tirx_locator_wait(" in debug.cuda_source


def test_the_normal_build_is_unchanged_by_the_locator():
    before = build_step(REPO / "solutions", "hopper", 5, shape=SHAPE)
    debug = _debug_build("hopper", 5, "sm_90a")
    after = build_step(REPO / "solutions", "hopper", 5, shape=SHAPE)
    assert (after.cuda_source, after.sass) == (before.cuda_source, before.sass)
    assert "tirx_locator" not in after.cuda_source
    # the debug build is the same source plus the bounded waits, and nothing else
    assert debug.cuda_source != before.cuda_source
    assert locator._strip_instrumentation(debug.cuda_source) == before.cuda_source


def test_the_hook_is_removed_even_when_the_build_fails():
    import tvm_ffi

    with pytest.raises(ZeroDivisionError):
        with locator.instrumented(0):
            raise ZeroDivisionError
    assert tvm_ffi.get_global_func(locator.HOOK, allow_missing=True) is None


def test_each_bounded_wait_reports_the_line_of_its_call_in_the_plain_source(tmp_path):
    debug = _debug_build("hopper", 5, "sm_90a")
    plain_lines = locator._strip_instrumentation(debug.cuda_source).splitlines()
    source = tmp_path / "kernel.cu"
    source.write_text(debug.cuda_source)
    done = subprocess.run(
        [build._tool("nvcc"), "-E", "-arch=sm_90a", "-w", str(source)], capture_output=True, text=True, check=True
    )
    lines = [int(n) for n in re.findall(r"tirx_locator_wait\(.*?, \(phase_tma_ptr\[\d\]\), (\d+), 0\)", done.stdout)]
    expected = [b.wait_lines for b in debug.barriers]
    assert sorted(lines) == sorted(n for ns in expected for n in ns)
    assert all("tvm_builtin_cuda_mbarrier_wait(" in plain_lines[n - 1] for n in lines)


def test_the_barrier_map_of_hopper_step_5():
    barriers = _debug_build("hopper", 5, "sm_90a").barriers
    assert [(b.label, b.offset, b.init_count) for b in barriers] == [("tma_bar[0]", 0, 1), ("tma_bar[1]", 8, 1)]
    assert all(len(b.wait_lines) == 1 for b in barriers)


def test_the_barrier_map_of_blackwell_step_5():
    barriers = _debug_build("blackwell", 5, "sm_100a").barriers
    assert [(b.label, b.offset, b.init_count) for b in barriers] == [
        ("mma_bar[0]", 8, 1),
        ("tma_bar[0]", 16, 1),
        ("tma_bar[1]", 24, 1),
    ]
    assert len(barriers[0].wait_lines) == 2  # the MMA barrier is waited on in both stages of the loop


def test_the_barrier_map_reads_init_counts_from_the_kernel(tmp_path):
    source = (REPO / "solutions" / "hopper" / STEPS["hopper"][4].file_name).read_text()
    mutated, count = re.subn(r"(mbarrier\.init\.shared\.b64\(tma_bar[^,]*, T\.uint32\()1\)", r"\g<1>2)", source)
    assert count == 1
    (tmp_path / "hopper").mkdir()
    (tmp_path / "hopper" / STEPS["hopper"][4].file_name).write_text(mutated)
    barriers = _debug_build("hopper", 4, "sm_90a", tree=tmp_path).barriers
    assert [(b.label, b.init_count) for b in barriers] == [("tma_bar[0]", 2)]


def test_the_hung_kernel_of_the_gpu_tests_builds_with_its_barrier_map():
    debug = locator.build_debug(_hung_module().hgemm_v4, STEPS["hopper"][4], (128, 128, 64), "sm_90a", 132, 0x1000)
    locator.compile_cubin(debug.cuda_source, "sm_90a")
    assert [(b.label, b.offset, b.init_count, len(b.wait_lines)) for b in debug.barriers] == [
        ("ready[0]", 0, 32, 1),
        ("never[0]", 8, 1, 0),
        ("never[1]", 16, 1, 1),
    ]


def _words(records: list[dict]) -> np.ndarray:
    words = np.zeros(locator.HEADER_WORDS + locator.CAPACITY * locator.RECORD_WORDS, dtype=np.uint32)
    for slot, fields in enumerate(records):
        base = locator.HEADER_WORDS + slot * locator.RECORD_WORDS
        row = np.zeros(locator.RECORD_WORDS, dtype=np.uint32)
        row[locator.SMEM_BASE] = 0x400
        row[locator.GRID_X], row[locator.GRID_Y] = 6, 1
        for index, value in fields.items():
            row[index] = value
        row[locator.VALID] = 1
        words[base: base + locator.RECORD_WORDS] = row
    return words


def _stuck(cta: int, thread: int, offset: int, phase: int, pending: int, start: int, line: int = 334) -> dict:
    return {
        locator.CTA_X: cta, locator.THREAD: thread, locator.BAR_ADDR: 0x400 + offset, locator.PHASE: phase,
        locator.CURRENT_PARITY: phase, locator.PENDING: pending, locator.LINE: line, locator.START_LO: start,
    }


BARRIERS = [locator.Barrier("tma_bar", 0, 0, 1, (334,)), locator.Barrier("tma_bar", 1, 8, 2, (358,))]


def test_records_are_decoded_and_grouped_by_barrier_with_the_first_to_give_up_first():
    # later: lane 0 of warp 4 in CTAs 0-5 on tma_bar[1] (1 of 2 arrivals pending);
    # first: all of warps 0-3 in CTAs 0-5 on tma_bar[0]; one record slot left unwritten in between
    first = [_stuck(cta, t, 0, 1, 1, start=100) for cta in range(6) for t in range(128)]
    later = [_stuck(cta, 128, 8, 0, 1, start=500, line=358) for cta in range(6)]
    words = _words(later + [{}] + first)
    words[locator.HEADER_WORDS + len(later) * locator.RECORD_WORDS + locator.VALID] = 0
    records, overflowed = locator.decode(words)
    assert len(records) == 6 * 128 + 6 and not overflowed
    lines = locator.summarize(records, BARRIERS)
    assert lines[0].startswith("CTA 0-5, warps 0-3 (all lanes): waited on tma_bar[0] for phase 1 to complete (line 334")
    assert lines[0].endswith("; it is still in phase 1 with 1 of 1 pending arrival")
    assert lines[1].startswith("  usually: nobody arrived in this phase")
    assert lines[2].startswith("CTA 0-5, warp 4 (lane 0): waited on tma_bar[1] for phase 0 to complete (line 358")
    assert lines[3].startswith("  usually: 1 of 2 arrivals came")


def test_different_threads_in_different_ctas_are_not_merged():
    records, _ = locator.decode(_words(
        [_stuck(2, t, 0, 0, 1, start=1) for t in range(32, 64)] + [_stuck(5, 96 + 7, 0, 0, 1, start=1)]
    ))
    (line, _, _) = locator.summarize(records, BARRIERS)
    assert line.startswith("CTA 2, warp 1 (all lanes); CTA 5, warp 3 (lane 7): waited on tma_bar[0]")


def test_a_wait_on_memory_that_is_no_barrier_says_so_and_a_full_buffer_is_flagged():
    words = _words([_stuck(0, 0, 0x40, 0, 0, start=1)])
    words[0] = 1
    records, overflowed = locator.decode(words)
    assert overflowed
    line = locator.summarize(records, BARRIERS)[0]
    assert "shared memory +0x40 (no mbarrier of the kernel)" in line
    assert "its pending arrival count could not be read" in line  # no init count to judge the raw word by


def test_a_pending_count_beyond_the_init_count_is_not_reported():
    """On an H100 the raw barrier word of a barrier with 1 of 32 arrivals pending read as 1048576."""
    records, _ = locator.decode(_words([_stuck(2, 32, 0, 0, 1048576, start=1)]))
    lines = locator.summarize(records, BARRIERS)
    assert "could not be read" in lines[0] and "1048576" not in "\n".join(lines)


def test_make_debug_without_a_gpu_builds_and_prints_the_barrier_map():
    done = subprocess.run(
        [sys.executable, "-m", "grader.commands.debug", "--step", "5", "--impl", "solutions", "--track", "blackwell"],
        cwd=REPO, capture_output=True, text=True,
    )
    assert done.returncode == 0, done.stderr
    assert "debug build of step 5 (solutions/blackwell) at 256x384x192 for sm_100a: built" in done.stdout
    assert re.search(r"mma_bar\[0\]\s+0x8\s+1\s+\d+, \d+", done.stdout)


@pytest.mark.parametrize("args", [["--step", "x"], ["--step", "5", "--shape", "100x100x100"], ["--step", "5", "--track", "ampere"]])
def test_make_debug_with_bad_options_says_so_in_one_line(args):
    done = subprocess.run([sys.executable, "-m", "grader.commands.debug", *args], cwd=REPO, capture_output=True,
                          text=True)
    assert done.returncode == 2
    assert len(done.stderr.strip().splitlines()) == 1 and done.stderr.startswith("debug: ")


@pytest.mark.parametrize("track,number,arch,labels", [
    ("hopper", 8, "sm_90a", ["tma2mma", "mma2tma"]),
    ("blackwell", 9, "sm_100a", ["tma2mma", "mma2tma", "mma2ld", "ld2mma"]),
])
def test_the_barrier_map_calls_barriers_by_the_kernels_own_names(track, number, arch, labels):
    # TVMScript prints the pipeline classes' arrays as buffer, buffer_1, ...; a student knows them as tma2mma, ...
    barriers = _debug_build(track, number, arch).barriers
    assert list(dict.fromkeys(b.name for b in barriers)) == labels
