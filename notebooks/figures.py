"""The notebooks' figures: what each one computes, and how it is drawn.

Computations (tested in tests/test_figures.py) are plain functions returning numbers; the `draw_*`
functions turn them into matplotlib figures. Nothing here needs a GPU.
"""

from __future__ import annotations

import ast
import difflib
import json
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

BANKS = 32
BANK_BYTES = 4
FP16_BYTES = 2

# ---- shared memory: the 128B swizzle -------------------------------------------------------------


def swizzled_offsets(rows: int = 128, cols: int = 64) -> np.ndarray:
    """Element offset in shared memory of each (row, col) of a rows x cols fp16 tile, computed by
    applying the layout the kernels use (mma_shared_layout with SWIZZLE_128B_ATOM) to every coordinate."""
    import tvm
    from tvm.backend.cuda.tile_primitive.tma_utils import SwizzleMode, mma_shared_layout

    layout = mma_shared_layout(tvm.DataType("float16"), SwizzleMode.SWIZZLE_128B_ATOM, (rows, cols))
    return np.array(
        [[int(layout.apply(r, c, shape=(rows, cols))["m"]) for c in range(cols)] for r in range(rows)]
    )


def banks(offsets: np.ndarray) -> np.ndarray:
    """The shared-memory bank (0..31) holding each fp16 element at these element offsets."""
    return (offsets * FP16_BYTES // BANK_BYTES) % BANKS


def worst_bank_conflict(bank_of: np.ndarray, rows, cols) -> int:
    """How many distinct 4-byte words of the busiest bank one access to elements (rows x cols) needs:
    1 means conflict-free, n means the access takes n shared-memory wavefronts."""
    words: dict[int, set[int]] = {}
    for r in rows:
        for c in cols:
            words.setdefault(int(bank_of[r, c]), set()).add((r, c // 2))
    return max(len(w) for w in words.values())


def draw_swizzle(offsets: np.ndarray, rows_shown: int = 16):
    import matplotlib.pyplot as plt

    bank_of = banks(offsets)
    unswizzled = banks(np.arange(offsets.size).reshape(offsets.shape))
    fig, axes = plt.subplots(1, 2, figsize=(13, 4.2), sharey=True)
    for ax, data, title in (
        (axes[0], unswizzled[:rows_shown], "row-major, no swizzle"),
        (axes[1], bank_of[:rows_shown], "SWIZZLE_128B (the layout TIRx gives the kernels)"),
    ):
        image = ax.imshow(data, cmap="tab20b", vmin=0, vmax=BANKS - 1, aspect="auto", interpolation="nearest")
        ax.set_title(title)
        ax.set_xlabel("column (fp16 element, K)")
        for chunk in range(1, offsets.shape[1] // 8):
            ax.axvline(chunk * 8 - 0.5, color="white", linewidth=0.6)
        ax.add_patch(plt.Rectangle((7.5, -0.5), 8, 8, fill=False, edgecolor="red", linewidth=2))
    axes[0].set_ylabel("row (M)")
    fig.colorbar(image, ax=axes, label="bank")
    fig.suptitle(
        "Bank of each element of a 128x64 fp16 tile (first rows). Red box: one 16-byte column chunk of 8 rows, "
        "as ldmatrix / wgmma read it"
    )
    return fig


# ---- the persistent tile scheduler ------------------------------------------------------------


def group_major_tile(work_idx: int, m_tiles: int, n_tiles: int, group: int = 8) -> tuple[int, int]:
    """ClusterPersistentScheduler2D's (m_idx, n_idx) for a linear work index (cluster_m = cluster_n = 1,
    serpentine off): groups of `group` tile rows, column-major inside a group, groups top to bottom;
    the last, shorter group (tail) is column-major over its own rows."""
    full_groups = m_tiles // group
    span = group * n_tiles
    if work_idx < full_groups * span:
        group_id, within = divmod(work_idx, span)
        return group_id * group + within % group, within // group
    rest = work_idx - full_groups * span
    tail_rows = m_tiles - full_groups * group
    return full_groups * group + rest % tail_rows, rest // tail_rows


@dataclass
class Schedule:
    cta: np.ndarray  # [m_tile, n_tile] -> the persistent CTA (or cluster) that computes it
    round: np.ndarray  # [m_tile, n_tile] -> which of that CTA's tiles it is (0 = its first)
    order: np.ndarray  # [m_tile, n_tile] -> linear work index


def persistent_schedule(m_tiles: int, n_tiles: int, workers: int, group: int = 8) -> Schedule:
    """Worker w takes work indices w, w + workers, ... (the scheduler's init / next_tile)."""
    shape = (m_tiles, n_tiles)
    cta, rnd, order = (np.full(shape, -1) for _ in range(3))
    for work_idx in range(m_tiles * n_tiles):
        m, n = group_major_tile(work_idx, m_tiles, n_tiles, group)
        cta[m, n], rnd[m, n], order[m, n] = work_idx % workers, work_idx // workers, work_idx
    return Schedule(cta, rnd, order)


def draw_schedules(panels: list[tuple[str, Schedule]]):
    """One row per (title, schedule): which CTA takes each tile, and in which round."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(panels), 2, figsize=(12, 3.6 * len(panels)), squeeze=False)
    for (title, schedule), (ax_cta, ax_round) in zip(panels, axes):
        for ax, data, label, cmap in (
            (ax_cta, schedule.cta, "CTA", "nipy_spectral"),
            (ax_round, schedule.round, "round", "viridis"),
        ):
            image = ax.imshow(data, cmap=cmap, aspect="auto", interpolation="nearest")
            ax.set_title(f"{title}: {label} of each tile")
            ax.set_xlabel("n tile")
            ax.set_ylabel("m tile")
            fig.colorbar(image, ax=ax, label=label)
    fig.tight_layout()
    return fig


# ---- the pipeline protocol, as a timeline ---------------------------------------------------------


@dataclass(frozen=True)
class Protocol:
    """What a step's barrier protocol lets overlap, in the terms of its docstring."""

    stages: int  # shared-memory stages in the ring
    producer: bool  # a separate producer issues the TMA loads (warp specialization, step 7 on)
    groups_in_flight: int  # wgmma groups the consumer leaves running when it issues the next (0 or 1)
    ctas: int = 1  # CTAs whose consumers must all release a stage before it is refilled (cluster)
    consumers: int = 1  # consumer warpgroups per CTA
    persistent: bool = True  # more than one output tile per CTA


@dataclass(frozen=True)
class Durations:
    """Nominal durations (ns): chosen to show the protocol's shape, not measured."""

    load: float = 700.0  # TMA latency of one K tile (A and B) from L2/HBM into shared memory
    mma: float = 280.0  # one 128x128x64 tile of wgmma on one SM
    issue_gap: float = 60.0  # from wait_group returning to the next wgmma starting on the tensor core
    epilogue: float = 500.0  # registers -> shared memory -> TMA store
    skew: float = 0.1  # the second CTA's consumer is this much slower (steps 9-10)


def protocol_events(protocol: Protocol, k_tiles: int, tiles: int, d: Durations = Durations()) -> list[dict]:
    """Events {warp_role, event, stage, t_ns} of one CTA running `tiles` output tiles of `k_tiles` each,
    as the protocol orders them with nominal durations. Intervals are `<what>_begin` / `<what>_end`
    pairs, the same format an instrumented GPU build writes (docs/timeline-step08-h100.json)."""
    events: list[dict] = []

    def interval(role: str, what: str, stage, begin: float, end: float) -> None:
        if end > begin:
            events.append({"warp_role": role, "event": f"{what}_begin", "stage": stage, "t_ns": begin})
            events.append({"warp_role": role, "event": f"{what}_end", "stage": stage, "t_ns": end})

    total = k_tiles * tiles
    lanes = [(cta, c) for cta in range(protocol.ctas) for c in range(protocol.consumers)]
    role = {
        lane: ("warpgroup" if not protocol.producer else "consumer")
        + (f" {lane[1]}" if protocol.consumers > 1 else "")
        + (f" (CTA {lane[0]})" if protocol.ctas > 1 else "")
        for lane in lanes
    }
    mma_ns = {lane: d.mma * protocol.consumers * (1 + d.skew * lane[0]) for lane in lanes}
    landed: list[float] = []
    released = [0.0] * total  # when every consumer has released the stage of work item j
    lane_free = {lane: 0.0 for lane in lanes}  # when the lane may issue its next wgmma
    mma_end = {lane: 0.0 for lane in lanes}  # when its last wgmma finished on the tensor core
    producer_t = 0.0

    def load(j: int, issue: float) -> None:
        interval(f"stage {j % protocol.stages}: TMA", "load", j % protocol.stages, issue, issue + d.load)
        landed.append(issue + d.load)

    def consume(j: int) -> None:
        """Every consumer lane runs work item j; a stage is released when all lanes say so."""
        stage, last_of_tile = j % protocol.stages, j % k_tiles == k_tiles - 1
        for lane in lanes:
            begin = max(landed[j], lane_free[lane], mma_end[lane] + (0 if protocol.groups_in_flight else d.issue_gap))
            interval(role[lane], "wait", stage, lane_free[lane], landed[j])
            interval(role[lane], "mma", stage, begin, begin + mma_ns[lane])
            mma_end[lane] = begin + mma_ns[lane]
            # in flight 0: wait_group(0) right after the issue, so the lane is busy until its MMA ends;
            # in flight 1: the lane goes on to the next K tile and frees this stage one K tile later
            lane_free[lane] = mma_end[lane] if not protocol.groups_in_flight else begin + d.issue_gap
            if last_of_tile:
                interval(role[lane], "epilogue", None, mma_end[lane], mma_end[lane] + d.epilogue)
                lane_free[lane] = mma_end[lane] + d.epilogue
        released[j] = max(mma_end.values())

    if not protocol.producer:  # one warpgroup: prefetch, then wait / MMA / wait_group(0) / refill
        for tile in range(tiles):
            first = tile * k_tiles
            start = max([0.0] + list(lane_free.values()))
            for j in range(first, first + min(protocol.stages, k_tiles)):
                load(j, start)
            for j in range(first, first + k_tiles):
                consume(j)
                if j + protocol.stages < first + k_tiles:
                    load(j + protocol.stages, released[j])
        return sorted(events, key=lambda e: e["t_ns"])

    for j in range(total):  # a producer: refill stage s as soon as every consumer released it
        free_at = released[j - protocol.stages] if j >= protocol.stages else 0.0
        interval("producer", "wait", j % protocol.stages, producer_t, free_at)
        producer_t = max(producer_t, free_at)
        load(j, producer_t)
        producer_t += d.issue_gap
        consumed = j - protocol.groups_in_flight  # with a group in flight, item j-1 is released when j is issued
        if consumed >= 0:
            consume(consumed)
    for j in range(total - protocol.groups_in_flight, total):
        consume(j)
    return sorted(events, key=lambda e: e["t_ns"])


def intervals(events: list[dict]) -> list[tuple[str, str, object, float, float]]:
    """(warp_role, what, stage, begin, end) from begin/end event pairs, matched in order per role and kind."""
    open_at: dict[tuple[str, str], list[dict]] = {}
    found = []
    for event in sorted(events, key=lambda e: e["t_ns"]):
        what, _, edge = event["event"].rpartition("_")
        key = (event["warp_role"], what)
        if edge == "begin":
            open_at.setdefault(key, []).append(event)
        elif edge == "end" and open_at.get(key):
            begin = open_at[key].pop(0)
            found.append((event["warp_role"], what, begin["stage"], begin["t_ns"], event["t_ns"]))
    return found


def draw_timeline(events: list[dict], title: str):
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    spans = intervals(events)
    roles = sorted({s[0] for s in spans}, key=lambda r: (not r.startswith("stage"), r))
    fig, ax = plt.subplots(figsize=(13, 0.55 * len(roles) + 1.6))
    colors = plt.get_cmap("tab10")
    for role, what, stage, begin, end in spans:
        y = roles.index(role)
        if what == "wait":
            # a thin strip under the row: a consumer may wait while its previous wgmma still runs
            ax.barh(y + 0.3, end - begin, left=begin, height=0.25, color="none", edgecolor="grey", hatch="///")
        elif what == "epilogue":
            ax.barh(y, end - begin, left=begin, height=0.7, color="black", alpha=0.6)
        else:
            ax.barh(y, end - begin, left=begin, height=0.7, color=colors(int(stage or 0)), alpha=0.85)
    ax.set_yticks(range(len(roles)), roles)
    ax.invert_yaxis()
    ax.set_xlabel("time (ns)")
    ax.set_title(title)
    stages = sorted({int(s[2]) for s in spans if s[2] is not None})
    ax.legend(
        handles=[Patch(color=colors(s), label=f"stage {s}") for s in stages]
        + [Patch(facecolor="none", edgecolor="grey", hatch="///", label="waiting on a barrier"),
           Patch(color="black", alpha=0.6, label="epilogue")],
        loc="upper center", bbox_to_anchor=(0.5, -0.18), ncol=len(stages) + 2, fontsize=8,
    )
    fig.tight_layout()
    return fig


def idle_share(events: list[dict], role_prefix: str) -> float:
    """The share of the run during which no MMA of the roles starting with role_prefix is running."""
    spans = sorted((b, e) for r, what, _, b, e in intervals(events) if what == "mma" and r.startswith(role_prefix))
    end_of_run = max(e["t_ns"] for e in events)
    busy, covered_to = 0.0, 0.0
    for begin, end in spans:
        busy += max(0.0, end - max(begin, covered_to))
        covered_to = max(covered_to, end)
    return 1 - busy / end_of_run


# ---- the ladder --------------------------------------------------------------------------------


def tflops(shape, ms: float) -> float:
    m, n, k = shape
    return 2 * m * n * k / (ms * 1e-3) / 1e12


def draw_ladder(ladder: dict, shape=None):
    """TFLOP/s of each step and of cuBLAS at one shape (the largest in the file by default)."""
    import matplotlib.pyplot as plt

    rows = ladder["rows"]
    shape = list(shape or max((r["shape"] for r in rows), key=lambda s: s[0] * s[1] * s[2]))
    at_shape = [r for r in rows if list(r["shape"]) == shape]
    # the steps in order, then the outside baselines timed in the same run (rows named, not numbered)
    rows = (sorted((r for r in at_shape if isinstance(r["step"], int)), key=lambda r: r["step"])
            + [r for r in at_shape if not isinstance(r["step"], int)])
    xs = list(range(len(rows)))
    fig, ax = plt.subplots(figsize=(10, 4))
    ax.bar(xs, [tflops(shape, r["kernel_ms"]) for r in rows], label="step (reference solution) or baseline")
    ax.plot(xs, [tflops(shape, r["cublas_ms"]) for r in rows], "k_", markersize=30, mew=2, label="cuBLAS, same run")
    for x, r in zip(xs, rows):
        ax.annotate(f"{r['cublas_ms'] / r['kernel_ms']:.0%}", (x, tflops(shape, r["kernel_ms"])),
                    ha="center", va="bottom", fontsize=8)
    ax.set_xticks(xs, [str(r["step"]) for r in rows], fontsize=8)
    ax.set_xlabel("step")
    ax.set_ylabel("TFLOP/s")
    ax.set_title(f"{ladder['gpu']}, {'x'.join(map(str, shape))} ({ladder['date']}); labels: share of cuBLAS")
    ax.legend()
    fig.tight_layout()
    return fig


# ---- reading the solutions -----------------------------------------------------------------------


def solution_diff(previous: Path, current: Path) -> str:
    """A unified diff of two solution files, read now (not pasted)."""
    return "".join(
        difflib.unified_diff(
            previous.read_text().splitlines(keepends=True),
            current.read_text().splitlines(keepends=True),
            fromfile=previous.name, tofile=current.name, n=1,
        )
    )


def code_diff(previous: Path, current: Path) -> str:
    """The diff of the kernels' code only: docstrings and comments differ between every pair of steps."""
    def code(path: Path) -> list[str]:
        text = re.sub(r'"""[\s\S]*?"""', "", path.read_text())
        return [line for line in text.splitlines(keepends=True) if line.strip() and not line.strip().startswith("#")]

    return "".join(difflib.unified_diff(code(previous), code(current), fromfile=previous.name, tofile=current.name, n=0))


def constant(path: Path, name: str) -> int:
    """An integer constant of the step's hgemm_vN, literal (`NAME = 3`) or computed from earlier
    constants (`NAME = (BUDGET - USED) // SIZE`): its top-level assignments
    are evaluated in order, with no builtins and only the constants before them in scope; those that
    need the shape (M, N, K) or TVM are left out."""
    tree = ast.parse(path.read_text())
    function = next((node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name.startswith("hgemm_v")), None)
    values: dict[str, object] = {}
    for statement in function.body if function else []:
        if not isinstance(statement, ast.Assign):
            continue
        try:
            value = eval(compile(ast.Expression(statement.value), str(path), "eval"), {"__builtins__": {}}, dict(values))
        except Exception:  # a shape-dependent or non-arithmetic assignment (K_TILES = K // BLK_K, dtypes)
            continue
        for target in statement.targets:
            names = target.elts if isinstance(target, ast.Tuple) else [target]
            parts = value if isinstance(target, ast.Tuple) else [value]
            for node, part in zip(names, parts):
                if isinstance(node, ast.Name):
                    values[node.id] = part
    if not isinstance(values.get(name), int):
        raise ValueError(f"{path.name} assigns no integer {name}")
    return values[name]


def grep(text: str, pattern: str, limit: int = 8) -> str:
    """The first `limit` lines matching a regex, and how many there were in all."""
    lines = [line.strip() for line in text.splitlines() if re.search(pattern, line)]
    shown = "\n".join(line[:160] for line in lines[:limit])
    return f"{shown}\n... {len(lines)} lines match /{pattern}/" if lines else f"no line matches /{pattern}/"


def load_json(path: Path):
    return json.loads(path.read_text()) if path.exists() else None


def timeline_events(measured) -> list[dict]:
    """The events of a measured timeline (grader/analysis/timeline.py writes {header..., "events": [...]}),
    or the list itself for a file that holds only the events."""
    return measured["events"] if isinstance(measured, dict) else measured


# ---- beyond step 10: every shape -----------------------------------------------------------------


def model_ratios(table: dict, steps=(10, 11, 12)) -> dict[tuple[int, int, int], dict[str, float]]:
    """cuBLAS time / kernel time per shape of a bench table (`make bench --table models`) for each step that ran
    there (a step that refuses a shape has no row) and for the Triton seed, the better of its variants."""
    ratios: dict[tuple[int, int, int], dict[str, float]] = {}
    for row in table["rows"]:
        step = row["step"]
        name = "triton-seed" if isinstance(step, str) and step.startswith("triton-seed") else step
        if name not in (*steps, "triton-seed") or not row.get("correct", True):
            continue
        shape_ratios = ratios.setdefault(tuple(row["shape"]), {})
        key = f"step {name}" if isinstance(name, int) else name
        shape_ratios[key] = max(shape_ratios.get(key, 0.0), row["cublas_ms"] / row["kernel_ms"])
    return ratios


def geometric_mean(values) -> float:
    values = list(values)
    return float(np.exp(np.mean(np.log(values)))) if values else float("nan")


def draw_model_ratios(table: dict, steps=(10, 11, 12)):
    """Grouped bars: each step's (and the Triton seed's) share of cuBLAS at each shape of a bench table."""
    import matplotlib.pyplot as plt

    ratios = model_ratios(table, steps)
    shapes = sorted(ratios, key=lambda s: (s[0], s[1], s[2]))
    names = [f"step {s}" for s in steps] + ["triton-seed"]
    width = 0.8 / len(names)
    fig, ax = plt.subplots(figsize=(12, 4))
    for i, name in enumerate(names):
        xs = [x + i * width for x, shape in enumerate(shapes) if name in ratios[shape]]
        ys = [ratios[shape][name] for shape in shapes if name in ratios[shape]]
        ax.bar(xs, ys, width, label=f"{name} (geometric mean {geometric_mean(ys):.3f} over {len(ys)})")
    ax.axhline(1.0, color="k", lw=1)
    ax.set_xticks([x + 0.4 - width / 2 for x in range(len(shapes))], ["x".join(map(str, s)) for s in shapes],
                  rotation=60, ha="right", fontsize=7)
    ax.set_ylabel("cuBLAS time / kernel time")
    ax.set_title(f"{table['gpu']} ({table['date']}): no bar = the step refuses the shape")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def unit_owners(units, tiles: int, k_tiles: int) -> np.ndarray:
    """[tile, k tile] -> the cluster whose unit computes it (-1 where none does), from (cluster, tile, k_begin,
    k_end) units; raises ValueError where two units compute the same K tile of a tile."""
    owner = np.full((tiles, k_tiles), -1)
    for cluster, tile, k_begin, k_end in units:
        if (owner[tile, k_begin:k_end] != -1).any():
            raise ValueError(f"tile {tile}, K tiles {k_begin}..{k_end - 1}: computed twice")
        owner[tile, k_begin:k_end] = cluster
    return owner


def draw_units(panels):
    """One panel per (title, units, tiles, k_tiles): a row per tile, its K tiles coloured by the cluster that
    computes them, each unit labelled with its cluster; a tile's final range, which waits for the partial sums
    of the clusters before it, is hatched."""
    import matplotlib.pyplot as plt
    from matplotlib import colormaps

    fig, axes = plt.subplots(len(panels), 1, figsize=(12, sum(1.4 + 0.3 * p[2] for p in panels)), squeeze=False)
    for (title, units, tiles, k_tiles), (ax,) in zip(panels, axes):
        clusters = max(u[0] for u in units) + 1
        colours = colormaps["tab20"].resampled(max(clusters, 2))
        for cluster, tile, k_begin, k_end in units:
            waits = k_begin > 0 and k_end == k_tiles
            ax.barh(tile, k_end - k_begin, left=k_begin, color=colours(cluster % 20), edgecolor="k",
                    hatch="//" if waits else None)
            ax.text((k_begin + k_end) / 2, tile, str(cluster), ha="center", va="center", fontsize=7)
        ax.set_xlim(0, k_tiles)
        ax.set_ylim(tiles - 0.5, -0.5)
        ax.set_yticks(range(0, tiles, max(1, tiles // 16)))
        ax.set_xlabel("K tile")
        ax.set_ylabel("tile")
        ax.set_title(title, fontsize=9)
    fig.tight_layout()
    return fig
