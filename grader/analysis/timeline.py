"""A measured pipeline timeline of a step: %globaltimer stamps recorded by the kernel itself.

The timeline build is the kernel exactly as written (the same generated CUDA), with stamps around
TVM's mbarrier helpers, through the machinery the deadlock locator uses (grader/analysis/instrument.py):
  - every mbarrier wait (the helpers in locator.WAIT_HELPERS): a stamp before it and one after it
    (the barrier, the parity waited for);
  - every mbarrier arrive helper (`tvm_builtin_ptx_mbarrier_arrive*`: arrive, expect_tx arrive, the
    remote shared::cluster arrive of the cluster steps): a stamp just before the arrive;
  - every TMA store (`tvm_builtin_ptx_cp_async_bulk_tensor_s2g*`): a stamp after it is issued.
A stamp is taken only in CTA 0 and only by the first active lane of a warp (lane 0, or the elected
thread of a producer): a handful of warps record, in program order.

Each stamp reads %globaltimer (ns, but on many GPUs it ticks in steps of up to 1 us) and %clock64
(the SM's cycles: every warp of CTA 0 is on one SM, so one clock). The times reported are the
cycles converted to ns by a straight-line fit of %globaltimer against %clock64 over the run, which
keeps the clock's resolution and the timer's scale; if the fit is not plausible, %globaltimer itself.

Where the stamps go: a device buffer (torch) whose address is written into the source as a constant,
as the locator does with its mapped host buffer. The timeline kernel always ends, so device memory
does: no PCIe write in the middle of the kernel being measured. A slot counter in the buffer's header
bounds it (CAPACITY stamps); a full buffer is flagged, and the stamps kept are the first ones.

From stamps to the events `notebooks/figures.py` draws ({warp_role, event, stage, t_ns}, see
figures.protocol_events), per warp role (producer: the warps that issue TMA loads; consumer(s): the
warpgroups that issue wgmma; features.issuing_warps reads that from the source):
  wait      a role's wait on a barrier, begin to end; stage = the barrier's index in its ring
  mma       a consumer's K tile: its wait on the full barrier tma2mma[s] ends -> it arrives on the
            empty barrier mma2tma[s] (releases the stage; with a wgmma group left in flight this is
            after the next K tile was issued, so consecutive intervals overlap)
  load      row "stage s: TMA": the producer's expect_tx arrive on tma2mma[s] -> the first consumer's
            wait on tma2mma[s] for that phase ends
  epilogue  a consumer's last K tile of an output tile released -> its last TMA store of the tile
            issued (or, with no store seen, its next wait on a full barrier begins)
Only the first `tiles` output tiles of CTA 0 (K tiles of the consumers and of the producer) are kept.

This module builds and reads; the run is a child process over a copy of the course
(grader/runs/timeline_child.py), started by `make timeline` (grader/commands/timeline.py).
"""

from __future__ import annotations

import datetime
import re
from dataclasses import dataclass
from types import SimpleNamespace

from grader.analysis import features, locator, protocol_lint
from grader.analysis import instrument as instrument_module
from grader.core.steps import Shape

CAPACITY = 1 << 15  # stamps; a whole 4096^3 run of CTA 0 in steps 7-10 takes fewer than 12k
RECORD_WORDS = 8
HEADER_WORDS = 8  # [0]: set when a stamp found the buffer full; [1]: slots taken
RUN_LIMIT_S = 30.0
KINDS = {1: "wait_begin", 2: "wait_end", 3: "arrive", 4: "arrive_expect_tx", 5: "store"}
KIND_CODE = {name: code for code, name in KINDS.items()}
ARRIVE_HELPER = re.compile(r"__device__ void (tvm_builtin_ptx_mbarrier_arrive\w*)\(([^)]*)\)")
STORE_HELPER = re.compile(r"__device__ void (tvm_builtin_ptx_cp_async_bulk_tensor_s2g\w*)\(([^)]*)\)")
TRACK = "hopper"
ARCH = "sm_90a"
STEPS_COVERED = (7, 8, 9, 10)  # warp-specialized: a producer and consumer warpgroups

_DEVICE_CODE = r"""
#define TIRX_TIMELINE_RECORDS __RECORDS__ULL
#define TIRX_TIMELINE_CAPACITY __CAPACITY__u
extern __shared__ __align__(16) unsigned char tirx_timeline_smem[];

__device__ __forceinline__ void tirx_timeline_stamp(unsigned int kind, unsigned int bar, unsigned int phase,
                                                    unsigned int line, int cluster_address) {
  if ((blockIdx.x | blockIdx.y | blockIdx.z) != 0u) return;
  unsigned int lane;
  asm volatile("mov.u32 %0, %%laneid;" : "=r"(lane));
  if (lane != (unsigned int)(__ffs(__activemask()) - 1)) return;
  unsigned long long t, c;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t) :: "memory");
  asm volatile("mov.u64 %0, %%clock64;" : "=l"(c) :: "memory");
  unsigned int base = (unsigned int)__cvta_generic_to_shared(tirx_timeline_smem), rank = 0u;
  if (cluster_address) {
    asm volatile("getctarank.shared::cluster.u32 %0, %1;" : "=r"(rank) : "r"(bar));
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(base) : "r"(base), "r"(rank));
  }
  unsigned int* header = (unsigned int*)TIRX_TIMELINE_RECORDS;
  unsigned int slot = atomicAdd(header + 1, 1u);
  if (slot >= TIRX_TIMELINE_CAPACITY) {
    header[0] = 1u;
    return;
  }
  unsigned int warp = (threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z)) >> 5;
  uint4* r = (uint4*)(header + __HEADER_WORDS__ + slot * __RECORD_WORDS__);
  r[0] = make_uint4(kind | (rank << 8) | (warp << 16), bar - base, phase, line);
  r[1] = make_uint4((unsigned int)t, (unsigned int)(t >> 32), (unsigned int)c, (unsigned int)(c >> 32));
}
"""


# ---- the instrumented build ----------------------------------------------------------------------


@dataclass(frozen=True)
class Helper:
    name: str
    kind: str  # wait, arrive, arrive_expect_tx, store
    params: int
    cluster_address: bool  # its address is a shared::cluster one (a remote arrive)


def stamped_helpers(cuda_source: str) -> list[Helper]:
    """TVM's helpers in this source that the timeline build stamps."""
    helpers = [Helper(name, "wait", 2, False) for name in locator.WAIT_HELPERS
               if re.search(rf"__device__ void {name}\(", cuda_source)]
    for name, params in ARRIVE_HELPER.findall(cuda_source):
        if params.split(",")[0].strip() != "uint32_t __addr":
            continue  # not an address we can name; never emitted by TVM 0.27 for these steps
        kind = "arrive_expect_tx" if "expect_tx" in name else "arrive"
        helpers.append(Helper(name, kind, len(params.split(",")), "shared__cluster" in name))
    for name, params in STORE_HELPER.findall(cuda_source):
        helpers.append(Helper(name, "store", len([p for p in params.split(",") if p.strip()]), False))
    return helpers


def _macro(helper: Helper) -> str:
    args = [f"p{i}" for i in range(helper.params)]
    call = f"({helper.name})({', '.join(args)})"
    if helper.kind == "wait":
        address = locator.WAIT_HELPERS[helper.name][0].replace("(bar)", "(p0)")
        return (
            f"#define {helper.name}(p0, p1) do {{ unsigned int tirx_tl_b = {address}; int tirx_tl_p = (p1); "
            f"tirx_timeline_stamp(1u, tirx_tl_b, (unsigned int)tirx_tl_p, __LINE__, 0); "
            f"({helper.name})((p0), tirx_tl_p); "
            f"tirx_timeline_stamp(2u, tirx_tl_b, (unsigned int)tirx_tl_p, __LINE__, 0); }} while (0)"
        )
    if helper.kind == "store":
        return (f"#define {helper.name}({', '.join(args)}) do {{ {call}; "
                f"tirx_timeline_stamp(5u, 0u, 0u, __LINE__, 0); }} while (0)")
    code = KIND_CODE[helper.kind]
    rest = "".join(f", {a}" for a in args[1:])
    return (
        f"#define {helper.name}({', '.join(args)}) do {{ unsigned int tirx_tl_a = (unsigned int)(p0); "
        f"tirx_timeline_stamp({code}u, tirx_tl_a, 0u, __LINE__, {int(helper.cluster_address)}); "
        f"({helper.name})(tirx_tl_a{rest}); }} while (0)"
    )


def instrument(cuda_source: str, records_address: int) -> str:
    """The same source, with a stamp at every mbarrier wait (begin, end), arrive and TMA store."""
    device_code = (
        _DEVICE_CODE.replace("__RECORDS__", hex(records_address))
        .replace("__CAPACITY__", str(CAPACITY))
        .replace("__HEADER_WORDS__", str(HEADER_WORDS))
        .replace("__RECORD_WORDS__", str(RECORD_WORDS))
    )
    return instrument_module.splice(cuda_source, device_code, [_macro(h) for h in stamped_helpers(cuda_source)])


def stamp_sites(cuda_source: str) -> dict[str, int]:
    """Call sites in the kernel's body per kind of stamp (a wait has two stamps: begin and end)."""
    body = "\n".join(protocol_lint.kernel_body(cuda_source))
    sites: dict[str, int] = {}
    for helper in stamped_helpers(cuda_source):
        calls = len(re.findall(rf"\b{helper.name}\(", body))
        for kind in (("wait_begin", "wait_end") if helper.kind == "wait" else (helper.kind,)):
            sites[kind] = sites.get(kind, 0) + calls
    return sites


def warp_roles(cuda_source: str) -> dict[int, str]:
    """warp -> producer / consumer / consumer i / warpgroup, from which warps issue TMA loads and wgmma."""
    found = re.search(r"__launch_bounds__\((\d+)", cuda_source)
    art = SimpleNamespace(cuda_source=cuda_source, threads_per_cta=int(found.group(1)) if found else 128)
    loaders = features.issuing_warps(art, protocol_lint.TMA_LOAD)
    multipliers = features.issuing_warps(art, protocol_lint.WGMMA)
    roles = {w: "producer" for w in loaders - multipliers}
    groups = sorted({w // 4 for w in multipliers - loaders})
    for i, group in enumerate(groups):
        for w in range(4 * group, 4 * group + 4):
            roles.setdefault(w, "consumer" if len(groups) == 1 else f"consumer {i}")
    roles.update({w: "warpgroup" for w in loaders & multipliers})
    return dict(sorted(roles.items()))


@dataclass
class TimelineBuild:
    executable: object
    cuda_source: str  # instrumented
    plain_source: str
    barriers: list[locator.Barrier]
    roles: dict[int, str]
    sites: dict[str, int]


def build_timeline(factory, spec, shape: Shape, arch: str, sm_count: int, records_address: int) -> TimelineBuild:
    built = instrument_module.build_instrumented(
        factory, spec, shape, arch, sm_count, lambda code: instrument(code, records_address)
    )
    return TimelineBuild(
        built.executable, built.cuda_source, built.plain_source,
        locator.barrier_map(built.tir_script, built.plain_source, locator.source_labels(factory, built.tir_script)),
        warp_roles(built.plain_source),
        stamp_sites(built.plain_source),
    )


# ---- stamps -> events ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Stamp:
    kind: str
    warp: int
    barrier_offset: int  # bytes from the start of dynamic shared memory (of the target CTA)
    target_rank: int  # the CTA of the cluster whose barrier it is (remote arrives); else 0
    phase: int
    line: int
    globaltimer: int
    clock: int


def decode(words) -> tuple[list[Stamp], bool]:
    """Stamps from the buffer's 32-bit words, in slot order; and whether it overflowed."""
    import numpy as np

    words = np.asarray(words, dtype=np.uint64)
    table = words[HEADER_WORDS: HEADER_WORDS + CAPACITY * RECORD_WORDS].reshape(-1, RECORD_WORDS)
    stamps = [
        Stamp(
            kind=KINDS[int(r[0]) & 0xFF], warp=int(r[0]) >> 16, barrier_offset=int(r[1]),
            target_rank=(int(r[0]) >> 8) & 0xFF, phase=int(r[2]), line=int(r[3]),
            globaltimer=int(r[4]) | (int(r[5]) << 32), clock=int(r[6]) | (int(r[7]) << 32),
        )
        for r in table[np.isin(table[:, 0] & 0xFF, list(KINDS))]
    ]
    return stamps, bool(words[0] == 1)


def encode(stamps: list[Stamp], capacity: int = CAPACITY):
    """The buffer the kernel would have written (for tests)."""
    import numpy as np

    words = np.zeros(HEADER_WORDS + capacity * RECORD_WORDS, dtype=np.uint32)
    words[1] = len(stamps)
    for slot, s in enumerate(stamps):
        base = HEADER_WORDS + slot * RECORD_WORDS
        words[base: base + RECORD_WORDS] = [
            KIND_CODE[s.kind] | (s.target_rank << 8) | (s.warp << 16), s.barrier_offset, s.phase, s.line,
            s.globaltimer & 0xFFFFFFFF, s.globaltimer >> 32, s.clock & 0xFFFFFFFF, s.clock >> 32,
        ]
    return words


def times_ns(stamps: list[Stamp]) -> tuple[list[float], str]:
    """Each stamp's time in ns from the first; and which timer gave it."""
    import numpy as np

    if not stamps:
        return [], "none"
    clock = np.array([s.clock for s in stamps], dtype=np.float64)
    timer = np.array([s.globaltimer for s in stamps], dtype=np.float64)
    if np.ptp(clock) > 0 and np.ptp(timer) > 0:
        slope, _ = np.polyfit(clock - clock.min(), timer - timer.min(), 1)
        if 0.2 <= slope <= 5.0:  # ns per cycle of a 0.2-5 GHz SM clock
            return list((clock - clock.min()) * slope), f"%clock64 fitted to %globaltimer ({1 / slope:.3f} GHz)"
    return list(timer - timer.min()), "%globaltimer"


def events(stamps: list[Stamp], barriers: list[locator.Barrier], roles: dict[int, str], k_tiles: int,
           tiles: int = 2) -> list[dict]:
    """The figures' events {warp_role, event, stage, t_ns} of the first `tiles` output tiles of CTA 0."""
    t_of = dict(zip(range(len(stamps)), times_ns(stamps)[0]))
    order = sorted(range(len(stamps)), key=lambda i: (t_of[i], i))
    stage_of = {b.offset: b.index for b in barriers}
    full = {s.barrier_offset for s in stamps if s.kind == "arrive_expect_tx"}
    limit = tiles * k_tiles
    spans: list[tuple[str, str, object, float, float]] = []

    role_names = sorted(set(roles.values()))
    waits: dict[str, list[tuple[int, float, float]]] = {}  # role -> (barrier, begin, end) in order
    for role in role_names:
        members = [w for w, r in roles.items() if r == role]
        waiting = [w for w in members if any(stamps[i].warp == w and stamps[i].kind == "wait_begin" for i in order)]
        if not waiting:
            continue
        open_begin: float | None = None
        pairs = []
        for i in order:
            s = stamps[i]
            if s.warp != min(waiting):
                continue
            if s.kind == "wait_begin":
                open_begin = t_of[i]
            elif s.kind == "wait_end" and open_begin is not None:
                pairs.append((s.barrier_offset, open_begin, t_of[i]))
                open_begin = None
        waits[role] = pairs

    # consumers: K tiles are their waits on full barriers; each ends at the release of its stage
    full_ends: dict[str, dict[int, list[float]]] = {}  # role -> full barrier -> wait ends, in order
    cutoff = 0.0
    for role, pairs in waits.items():
        members = {w for w, r in roles.items() if r == role}
        k_tiles_seen = [(offset, begin, end) for offset, begin, end in pairs if offset in full]
        if not k_tiles_seen:
            continue
        full_ends[role] = {}
        for offset, _, end in k_tiles_seen:
            full_ends[role].setdefault(offset, []).append(end)
        releases: dict[int, list[float]] = {}  # stage -> its release arrives (own CTA), in order
        stores = []
        for i in order:
            s = stamps[i]
            if s.warp not in members:
                continue
            if s.kind == "arrive" and s.target_rank == 0 and s.barrier_offset not in full and s.barrier_offset in stage_of:
                releases.setdefault(stage_of[s.barrier_offset], []).append(t_of[i])
            elif s.kind == "store":
                stores.append(t_of[i])
        used = {stage: 0 for stage in releases}
        mma_end = []
        for j, (offset, begin, end) in enumerate(k_tiles_seen):
            stage = stage_of.get(offset)
            released = releases.get(stage, [])
            if used.get(stage, 0) >= len(released):
                break
            mma_end.append(released[used[stage]])
            used[stage] += 1
            if j < limit:
                spans.append((role, "mma", stage, end, mma_end[j]))
                cutoff = max(cutoff, mma_end[j])
        for tile in range(tiles):
            last = (tile + 1) * k_tiles - 1
            if last >= len(mma_end):
                break
            begin = mma_end[last]
            following = k_tiles_seen[last + 1][1] if last + 1 < len(k_tiles_seen) else None
            issued = [t for t in stores if t > begin and (following is None or t < following)]
            end = issued[-1] if issued else following
            if end is not None:
                spans.append((role, "epilogue", None, begin, end))
                cutoff = max(cutoff, end)
        for j, (offset, begin, end) in enumerate(pairs):
            if j < limit or begin <= cutoff:
                spans.append((role, "wait", stage_of.get(offset), begin, end))

    # producers: the K tiles they load; each load ends when its first consumer's wait for it ends
    for role, pairs in waits.items():
        if role in full_ends:
            continue
        for offset, begin, end in pairs[:limit]:
            spans.append((role, "wait", stage_of.get(offset), begin, end))
        members = {w for w, r in roles.items() if r == role}
        issued: dict[int, int] = {}
        count = 0
        for i in order:
            s = stamps[i]
            if s.warp not in members or s.kind != "arrive_expect_tx" or count >= limit:
                continue
            n = issued.get(s.barrier_offset, 0)
            issued[s.barrier_offset] = n + 1
            count += 1
            landed = [by_barrier[s.barrier_offset][n] for by_barrier in full_ends.values()
                      if len(by_barrier.get(s.barrier_offset, [])) > n]
            stage = stage_of.get(s.barrier_offset)
            if landed and stage is not None:
                spans.append((f"stage {stage}: TMA", "load", stage, t_of[i], min(landed)))

    if not spans:
        return []
    start = min(begin for *_, begin, _ in spans)
    found = []
    for role, what, stage, begin, end in spans:
        found.append({"warp_role": role, "event": f"{what}_begin", "stage": stage, "t_ns": round(begin - start, 1)})
        found.append({"warp_role": role, "event": f"{what}_end", "stage": stage, "t_ns": round(end - start, 1)})
    return sorted(found, key=lambda e: e["t_ns"])


# ---- the document ---------------------------------------------------------------------------------


def document(gpu: str, spec, impl: str, shape: Shape, tiles: int, check: str, max_error: float,
             stamps: list[Stamp], overflowed: bool, roles: dict[int, str], barriers: list[locator.Barrier]) -> dict:
    """The JSON the notebook reads: a header, then the events."""
    k_tiles = shape[2] // spec.shapes.tile[2]
    return {
        "gpu": gpu, "date": datetime.date.today().isoformat(),
        "step": spec.number, "track": TRACK, "impl": impl, "shape": list(shape), "cta": 0,
        "tiles": tiles, "k_tiles": k_tiles, "check": check, "max_error": max_error,
        "timer": times_ns(stamps)[1], "stamps": len(stamps), "overflowed": overflowed,
        "roles": {str(w): r for w, r in roles.items()},
        "barriers": [{"label": b.label, "offset": b.offset, "init_count": b.init_count} for b in barriers],
        "events": events(stamps, barriers, roles, k_tiles, tiles),
    }
