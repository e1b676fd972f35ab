"""The computations behind the notebooks' figures (notebooks/figures.py)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import pytest

from conftest import REPO

sys.path.insert(0, str(REPO / "notebooks"))
import figures  # noqa: E402


@pytest.fixture(scope="module")
def offsets():
    return figures.swizzled_offsets()


def test_swizzle_is_a_permutation_of_the_tile(offsets):
    assert sorted(offsets.flatten().tolist()) == list(range(128 * 64))


def test_swizzle_matches_the_sw128_xor_formula(offsets):
    # SW128: the 16-byte chunk index (bits 3-5 of the element offset) XOR the row within 8 rows
    rows, cols = np.meshgrid(np.arange(128), np.arange(64), indexing="ij")
    linear = rows * 64 + cols
    assert (offsets == linear ^ ((rows % 8) << 3)).all()


def test_sixteen_byte_column_of_eight_rows_is_conflict_free(offsets):
    bank_of = figures.banks(offsets)
    for first_row in range(0, 128, 8):
        for chunk in range(8):
            rows, cols = range(first_row, first_row + 8), range(8 * chunk, 8 * chunk + 8)
            assert figures.worst_bank_conflict(bank_of, rows, cols) == 1


def test_without_swizzle_the_same_read_is_an_8_way_conflict():
    bank_of = figures.banks(np.arange(128 * 64).reshape(128, 64))
    assert figures.worst_bank_conflict(bank_of, range(8), range(8, 16)) == 8


def test_scheduler_order_matches_its_docstring_example():
    # tvm/backend/cuda/lang/tile_scheduler.py, Example 1: 4x4 tiles, l2_group_size=2, 3 clusters
    schedule = figures.persistent_schedule(4, 4, workers=3, group=2)
    assert schedule.order.tolist() == [[0, 2, 4, 6], [1, 3, 5, 7], [8, 10, 12, 14], [9, 11, 13, 15]]
    # its "Tile grid (which cluster handles each tile)"
    assert schedule.cta.tolist() == [[0, 2, 1, 0], [1, 0, 2, 1], [2, 1, 0, 2], [0, 2, 1, 0]]


@pytest.mark.parametrize("m_tiles, n_tiles, workers", [(16, 16, 132), (32, 23, 148), (27, 3, 5), (3, 5, 2)])
def test_scheduler_order_is_a_permutation_and_balanced(m_tiles, n_tiles, workers):
    schedule = figures.persistent_schedule(m_tiles, n_tiles, workers)
    assert sorted(schedule.order.flatten().tolist()) == list(range(m_tiles * n_tiles))
    tiles_per_worker = np.bincount(schedule.cta.flatten(), minlength=workers)
    assert tiles_per_worker.max() - tiles_per_worker.min() <= 1


def _scheduler_from_generated_cuda(source: str, grid: int):
    """The step-6 kernel's next_tile block, from the generated CUDA, as a Python function of work_idx.

    The block is `W[0] = (W[0] + grid); ...; if (...) {...} else {...}`: C expressions on
    non-negative ints, so `/` becomes `//` and the rest reads as Python."""
    start = re.search(rf"(\w+)\[0\] = \(\1\[0\] \+ {grid}\);", source)
    work = start.group(1)
    lines, depth = [], 0
    for line in source[start.end():].splitlines()[1:]:
        line = line.strip()
        if line == "}" and depth == 1 and not lines[-1].startswith("else"):
            break
        lines.append(line)
        depth += line.count("{") - line.count("}")
        if depth == 0 and lines[0].startswith("if"):
            break
    python, indent = [], 0
    for line in lines:
        if line.startswith("} else {"):
            python.append("    " * (indent - 1) + "else:")
        elif line.startswith("if ") and line.endswith("{"):
            python.append("    " * indent + "if " + line[3:-1].strip().replace("(bool)1", "True") + ":")
            indent += 1
        elif line == "}":
            indent -= 1
        elif line.startswith("int "):
            python.append("    " * indent + line[4:].rstrip(";"))
        elif line.startswith("tile_scheduler_tile_count"):
            continue
        else:
            python.append("    " * indent + line.rstrip(";"))
    body = "\n".join(python).replace("(int)", "").replace("/", "//").replace("&&", " and ")
    assignments = re.findall(r"^\s*(\w+)\[0\] = ", body, re.MULTILINE)
    m_var, n_var = assignments[0], assignments[1]

    def tile(work_idx: int) -> tuple[int, int]:
        state = {work: [work_idx - grid], m_var: [0], n_var: [0]}
        exec(f"{work}[0] = {work}[0] + {grid}\n" + body, {}, state)
        return state[m_var][0], state[n_var][0]

    return tile


def test_scheduler_reproduction_matches_the_generated_cuda():
    """Build step 6 (Hopper solution) with 27 x 3 tiles (three full L2 groups of 8 rows and a tail of 3)
    on 10 CTAs (5 SMs), and run its generated index arithmetic for every work index."""
    from grader.core import build
    from grader.core.steps import STEPS

    spec, sm_count, m_tiles, n_tiles = STEPS["hopper"][6], 5, 27, 3
    grid = 2 * sm_count  # step 6 launches the two CTAs an SM holds at once
    factory = build.kernel_factory(REPO / "solutions", "hopper", spec)
    prim_func = build.make_prim_func(factory, spec, (128 * m_tiles, 128 * n_tiles, 64), sm_count)
    source = build.compile_module(prim_func, "sm_90a").mod.imports[0].inspect_source()
    generated = _scheduler_from_generated_cuda(source, grid)
    for work_idx in range(grid, m_tiles * n_tiles):
        assert generated(work_idx) == figures.group_major_tile(work_idx, m_tiles, n_tiles), work_idx


STEP_PROTOCOLS = {
    6: figures.Protocol(stages=2, producer=False, groups_in_flight=0),
    7: figures.Protocol(stages=4, producer=True, groups_in_flight=1),
    8: figures.Protocol(stages=6, producer=True, groups_in_flight=1),
    10: figures.Protocol(stages=4, producer=True, groups_in_flight=1, ctas=2, consumers=2),
}


@pytest.mark.parametrize("step", sorted(STEP_PROTOCOLS))
def test_protocol_timeline_respects_the_barriers(step):
    protocol, k_tiles, tiles = STEP_PROTOCOLS[step], 5, 3
    events = figures.protocol_events(protocol, k_tiles, tiles)
    spans = figures.intervals(events)
    loads = [s for s in spans if s[1] == "load"]
    assert len(loads) == k_tiles * tiles
    assert len([s for s in spans if s[1] == "mma"]) == k_tiles * tiles * protocol.ctas * protocol.consumers
    # no stage is refilled before its previous load has been consumed: loads of one stage never overlap
    for stage in range(protocol.stages):
        ends_and_begins = sorted((b, e) for _, _, s, b, e in loads if s == stage)
        assert all(prev_end <= begin for (_, prev_end), (begin, _) in zip(ends_and_begins, ends_and_begins[1:]))
    # every MMA starts after its K tile landed (the i-th MMA of a role reads the i-th load)
    landed = sorted(e for *_, e in loads)
    for role in {s[0] for s in spans if s[1] == "mma"}:
        begins = sorted(b for r, what, _, b, _ in spans if r == role and what == "mma")
        assert all(begin >= land for begin, land in zip(begins, landed))


def test_deeper_pipeline_leaves_the_tensor_core_less_idle():
    # a load slower than what step 7's four stages cover (two of them held by the consumer) at 280 ns a K tile
    slow_memory = figures.Durations(load=1000.0)
    step7 = figures.protocol_events(STEP_PROTOCOLS[7], k_tiles=8, tiles=2, d=slow_memory)
    step8 = figures.protocol_events(STEP_PROTOCOLS[8], k_tiles=8, tiles=2, d=slow_memory)
    assert figures.idle_share(step8, "consumer") < figures.idle_share(step7, "consumer")


def test_code_diff_shows_only_code(tmp_path: Path):
    before, after = tmp_path / "a.py", tmp_path / "b.py"
    before.write_text('"""doc one"""\nx = 1\n# comment\n')
    after.write_text('"""doc two"""\nx = 2\n# other comment\n')
    assert figures.code_diff(before, after).splitlines()[2:] == ["@@ -1 +1 @@", "-x = 1", "+x = 2"]


def test_a_constant_is_read_literal_or_computed_from_earlier_ones(tmp_path: Path):
    step = tmp_path / "step08.py"
    step.write_text("def hgemm_v8(M, N, K):\n    BLK_M, BLK_K = 128, 64\n    K_TILES = K // BLK_K\n"
                    "    BUDGET = 1000\n    PIPE_DEPTH = (BUDGET - 200) // (BLK_M + BLK_K)\n    NAME = 'x'\n")
    assert figures.constant(step, "BLK_M") == 128
    assert figures.constant(step, "PIPE_DEPTH") == 4
    for missing in ("K_TILES", "NAME", "EPI_N"):  # needs the shape, is not an integer, is not there
        with pytest.raises(ValueError, match=f"assigns no integer {missing}"):
            figures.constant(step, missing)


def test_model_ratios_take_the_better_triton_variant_and_skip_refused_shapes():
    table = {"rows": [
        {"step": 10, "shape": [1000, 64, 64], "kernel_ms": 2.0, "cublas_ms": 1.0, "correct": False},
        {"step": 12, "shape": [1000, 64, 64], "kernel_ms": 1.0, "cublas_ms": 1.0},
        {"step": "triton-seed", "shape": [1000, 64, 64], "kernel_ms": 4.0, "cublas_ms": 1.0},
        {"step": "triton-seed-ws", "shape": [1000, 64, 64], "kernel_ms": 2.0, "cublas_ms": 1.0},
    ]}
    assert figures.model_ratios(table) == {(1000, 64, 64): {"step 12": 1.0, "triton-seed": 0.5}}
    assert figures.geometric_mean([0.5, 2.0]) == pytest.approx(1.0)


def test_unit_owners_refuse_a_k_tile_computed_twice():
    owners = figures.unit_owners([(0, 0, 0, 3), (1, 0, 3, 4), (1, 1, 0, 4)], tiles=2, k_tiles=4)
    assert owners.tolist() == [[0, 0, 0, 1], [1, 1, 1, 1]]
    with pytest.raises(ValueError, match="computed twice"):
        figures.unit_owners([(0, 0, 0, 3), (1, 0, 2, 4)], tiles=1, k_tiles=4)


@pytest.mark.parametrize("shape,sm_count", [((257, 264, 4104), 132), ((384, 64, 4160), 8), ((768, 384, 512), 8),
                                            ((128, 64, 2048), 4), ((256, 4096, 14336), 132), ((4096, 4096, 4096), 132)])
def test_step_12_units_cover_every_k_tile_once_and_wait_only_on_lower_clusters(shape, sm_count):
    """The notebook's units of a plan (solutions/notebook_text.py, the kernel's WorkUnits in Python): every K tile
    of every tile in exactly one unit; only the last unit of a cluster's stream-K range can be a tile's final range; and every cluster
    that feeds a tile's final range has a lower index than the cluster of that range."""
    import track_text
    from grader.core import build
    from grader.core.steps import STEPS

    solution = build.kernel_factory(REPO / "solutions", "hopper", STEPS["hopper"][12]).__globals__
    plans = [solution["plan_decomposition"](*shape, sm_count)]
    if shape == (768, 384, 512):
        plans.append(solution["stream_k"](128, 2, 9, 8, 4, 128, True))
    for plan in plans:
        units = track_text.units(plan)
        assert (figures.unit_owners(units, plan.tiles, plan.k_tiles) >= 0).all()
        last_units = {unit[0]: unit for unit in units if unit[1] < plan.sk_tiles}  # the last of each range
        for unit in units:
            cluster, tile, k_begin, k_end = unit
            if k_begin > 0 and k_end == plan.k_tiles:  # a final range: it waits on the tile's other units
                feeders = {c for c, t, _, _ in units if t == tile and c != cluster}
                assert feeders and max(feeders) < cluster, (plan, tile)
                assert last_units[cluster] == unit, (plan, cluster)
