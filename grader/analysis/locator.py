"""Deadlock locator: which warp of which CTA waited on which mbarrier, for which phase.

A debug build of a step is the kernel exactly as written, except that every mbarrier wait gives up
after BOUND_S seconds of %globaltimer instead of spinning forever. A wait that gives up writes one
record (CTA, cluster rank, thread, the barrier's shared-memory address, the phase parity it waited
for, the barrier's current phase parity and pending arrival count, the CUDA line of the wait) and
the thread exits. PTX's `exit` releases CTA- and cluster-wide barriers that only exited threads were
holding up, so the launch ends and the CUDA context stays usable.

How it is instrumented (the machinery is grader/analysis/instrument.py's, shared with grader/analysis/timeline.py): TVM
hands the generated CUDA source to the global function `tvm_callback_cuda_postproc` (if one is
registered) before NVRTC or nvcc compiles it. `instrumented()` registers that hook for one build and
removes it after, so a normal build never sees it. The rewrite
defines macros named like TVM's wait helpers (`tvm_builtin_cuda_mbarrier_wait`, its `_raw_u32` and
`_acquire_cluster` forms), placed after the helpers' definitions and before the kernel, so every call
site becomes a bounded wait that also knows its own `__LINE__`; `#line` directives keep the line
numbers those of the plain source (what `make inspect` prints). Named barriers (`bar.sync id, n`)
cannot be bounded: there is no try-form of them; a run that never ends is reported as such.

Where the records go: pinned host memory mapped into the device (cuMemHostAlloc with DEVICEMAP),
whose device address is written into the source as a constant before it is compiled. The host
reads it while the kernel runs, so records survive a kernel that never ends, and no module handle is
needed (TVM's runtime does not expose one to read a `__device__` variable through). Slots are taken
with an atomic on a counter in device memory (atomics on host memory over PCIe are not guaranteed);
each thread writes at most one record, and a full buffer is flagged, never silently dropped.

What is read from the barrier: its current phase parity with `mbarrier.test_wait.parity`
(documented), and its pending arrival count with `mbarrier.pending_count` applied to the barrier's
64-bit word read by `ld.shared`. The PTX ISA documents pending_count only for the opaque state that
`mbarrier.arrive` returns, and on an H100 (2026-11-23) the word in shared memory does NOT decode
that way (a barrier with 1 of 32 arrivals pending read as 1048576). So a count is shown only when it
is plausible (at most the barrier's init count), and otherwise the report says it could not be read;
the raw word is kept in the JSON record.

This module builds and reads; the run is a child process over a copy of the course
(grader/runs/debug_child.py), started by the grade after a hang and by `make debug` (grader/commands/debug.py).
"""

from __future__ import annotations

import ast
import contextlib
import re
from dataclasses import dataclass
from pathlib import Path

from grader.analysis import instrument as instrument_module
from grader.core.build import DTYPE_BYTES, shared_buffers
from grader.core.steps import Shape

BOUND_S = 1.5  # how long one wait spins before it gives up
CAPACITY = 1 << 17  # records; more than the threads of any launch in this course (256 CTAs x 384)
RECORD_WORDS = 24
HEADER_WORDS = 8  # [0]: set when a record found the buffer full
HOOK = instrument_module.HOOK
WAIT_HELPERS = {  # TVM's wait helper -> (argument that gives the shared address, acquire scope)
    "tvm_builtin_cuda_mbarrier_wait": ("(unsigned)__cvta_generic_to_shared(bar)", 0),
    "tvm_builtin_cuda_mbarrier_wait_raw_u32": ("(unsigned)(bar)", 0),
    "tvm_builtin_cuda_mbarrier_wait_acquire_cluster": ("(unsigned)__cvta_generic_to_shared(bar)", 1),
}

# Record layout, in 32-bit words.
(VALID, CTA_X, CTA_Y, CTA_Z, GRID_X, GRID_Y, CLUSTER_RANK, THREAD, BAR_ADDR, SMEM_BASE, PHASE, CURRENT_PARITY,
 PENDING, LINE, WORD_LO, WORD_HI, START_LO, START_HI) = range(18)

_DEVICE_CODE = r"""
#define TIRX_LOCATOR_RECORDS __RECORDS__ULL
#define TIRX_LOCATOR_CAPACITY __CAPACITY__u
#define TIRX_LOCATOR_BOUND_NS __BOUND_NS__ULL
extern __shared__ __align__(16) unsigned char tirx_locator_smem[];
__device__ unsigned int tirx_locator_used;

__device__ __forceinline__ unsigned long long tirx_locator_now() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__device__ __forceinline__ unsigned int tirx_locator_try(unsigned int bar, int phase, int cluster) {
  unsigned int done;
  if (cluster) {
    asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%1], %2;"
                 " selp.u32 %0, 1, 0, p; }" : "=r"(done) : "r"(bar), "r"(phase) : "memory");
  } else {
    asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.acquire.cta.shared::cta.b64 p, [%1], %2, %3;"
                 " selp.u32 %0, 1, 0, p; }" : "=r"(done) : "r"(bar), "r"(phase), "r"(0x989680) : "memory");
  }
  return done;
}

// Inlined: a called function is compiled for the kernel's full register count, and a warpgroup that
// lowered its count with setmaxnreg (the producer of steps 7-10) faults calling it (illegal instruction).
__device__ __forceinline__ void tirx_locator_give_up(unsigned int bar, int phase, int line, unsigned long long start) {
  unsigned int parity_zero_done, cluster_rank, pending;
  unsigned long long word;
  asm volatile("{ .reg .pred p; mbarrier.test_wait.parity.shared::cta.b64 p, [%1], 0; selp.u32 %0, 1, 0, p; }"
               : "=r"(parity_zero_done) : "r"(bar) : "memory");
  asm volatile("ld.volatile.shared.b64 %0, [%1];" : "=l"(word) : "r"(bar) : "memory");
  asm volatile("mbarrier.pending_count.b64 %0, %1;" : "=r"(pending) : "l"(word));
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(cluster_rank));
  volatile unsigned int* header = (volatile unsigned int*)TIRX_LOCATOR_RECORDS;
  unsigned int slot = atomicAdd(&tirx_locator_used, 1u);
  if (slot >= TIRX_LOCATOR_CAPACITY) {
    header[0] = 1;
  } else {
    volatile unsigned int* r = header + __HEADER_WORDS__ + slot * __RECORD_WORDS__;
    r[1] = blockIdx.x; r[2] = blockIdx.y; r[3] = blockIdx.z; r[4] = gridDim.x; r[5] = gridDim.y;
    r[6] = cluster_rank;
    r[7] = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
    r[8] = bar; r[9] = (unsigned int)__cvta_generic_to_shared(tirx_locator_smem);
    r[10] = (unsigned int)phase; r[11] = parity_zero_done; r[12] = pending; r[13] = (unsigned int)line;
    r[14] = (unsigned int)word; r[15] = (unsigned int)(word >> 32);
    r[16] = (unsigned int)start; r[17] = (unsigned int)(start >> 32);
    __threadfence_system();
    r[0] = 1;
    __threadfence_system();
  }
  asm volatile("exit;" ::: "memory");
}

__device__ __forceinline__ void tirx_locator_wait(unsigned int bar, int phase, int line, int cluster) {
  if (tirx_locator_try(bar, phase, cluster)) return;
  unsigned long long start = tirx_locator_now();
  while (!tirx_locator_try(bar, phase, cluster)) {
    if (tirx_locator_now() - start > TIRX_LOCATOR_BOUND_NS) {
      if (tirx_locator_try(bar, phase, cluster)) return;
      tirx_locator_give_up(bar, phase, line, start);
    }
  }
}
"""


# ---- the barrier map -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Barrier:
    name: str
    index: int
    offset: int  # bytes from the start of dynamic shared memory
    init_count: int | None  # None: no mbarrier.init of it was found in the kernel
    wait_lines: tuple[int, ...]  # lines of the generated CUDA that wait on it

    @property
    def label(self) -> str:
        return f"{self.name}[{self.index}]"


_BAR_REF = r"\(\(\(uint64_t\*\)pool_buf_ptr\)\[(\d+)\]\)"
_CUDA_INIT = re.compile(r"mbarrier_init\w*\(tvm_builtin_cuda_cvta_generic_to_shared\(\(&" + _BAR_REF + r"\)\), \(uint\)(\d+)\)")
_CUDA_WAIT = re.compile(r"\b(?:" + "|".join(WAIT_HELPERS) + r")\(\(&" + _BAR_REF)
_TIR_INIT = re.compile(r'T\.address_of\((\w+)\[[^\]]*\]\)\), T\.uint32\((\d+)\), "init"')


_BARRIER_CLASSES = ("TMABar", "TCGen05Bar", "MBarrier")


def source_labels(factory, tir_script: str) -> dict[str, str]:
    """source_labels_in the file that defines `factory`."""
    try:
        source = Path(factory.__code__.co_filename).read_text()
    except (AttributeError, OSError, ValueError):
        return {}
    return source_labels_in(source, factory.__name__, tir_script)


def source_labels_in(source: str, function_name: str, tir_script: str) -> dict[str, str]:
    """TIR name -> the kernel's own name for each of its mbarrier arrays. TVMScript prints the pipeline
    classes' arrays as buffer, buffer_1, ... or x_buf; the kernel's source calls them tma2mma, mma2tma, ...
    The source's `x = TMABar(pool, ...)` / `x = pool.alloc(..., "uint64")` lines, in order, pair with the
    TIR's 8-byte shared buffers in pool order; when the two counts differ nothing is renamed. The source
    is read as text, never run."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return {}
    function = next((node for node in ast.walk(tree)
                     if isinstance(node, ast.FunctionDef) and node.name == function_name), None)
    if function is None:
        return {}
    names = []
    for node in sorted((n for n in ast.walk(function) if isinstance(n, ast.Assign)), key=lambda n: n.lineno):
        target, value = node.targets[0], node.value
        if len(node.targets) != 1 or not isinstance(target, ast.Name) or not isinstance(value, ast.Call):
            continue
        is_class = isinstance(value.func, ast.Name) and value.func.id in _BARRIER_CLASSES
        is_alloc = isinstance(value.func, ast.Attribute) and value.func.attr == "alloc" and any(
            isinstance(arg, ast.Constant) and arg.value == "uint64" for arg in value.args)
        if is_class or is_alloc:
            names.append(target.id)
    barriers = sorted((b for b in shared_buffers(tir_script) if b.dtype == "uint64"), key=lambda b: b.offset)
    if len(barriers) != len(names):
        return {}
    return {b.name: name for b, name in zip(barriers, names) if b.name != name}


def barrier_map(tir_script: str, cuda_source: str, labels: dict[str, str] | None = None) -> list[Barrier]:
    """Every mbarrier of the kernel: the 8-byte shared buffers that mbarrier ops name in its TIR, under
    the kernel's own names where `labels` (source_labels) has them."""
    labels = labels or {}
    mbarrier_lines = "\n".join(line for line in tir_script.splitlines() if "mbarrier" in line)
    init_by_offset = {int(i) * 8: int(count) for i, count in _CUDA_INIT.findall(cuda_source)}
    init_by_buffer: dict[str, set[int]] = {}
    for name, count in _TIR_INIT.findall(tir_script):
        init_by_buffer.setdefault(name, set()).add(int(count))
    waits_by_offset: dict[int, list[int]] = {}
    for number, line in enumerate(cuda_source.splitlines(), start=1):
        for index in _CUDA_WAIT.findall(line):
            waits_by_offset.setdefault(int(index) * 8, []).append(number)

    barriers = []
    for buffer in shared_buffers(tir_script):
        if DTYPE_BYTES.get(buffer.dtype) != 8 or not re.search(rf"\b{buffer.name}\[", mbarrier_lines):
            continue
        buffer_counts = init_by_buffer.get(buffer.name, set())
        for index in range(buffer.size // 8):
            offset = buffer.offset + 8 * index
            count = init_by_offset.get(offset, next(iter(buffer_counts)) if len(buffer_counts) == 1 else None)
            barriers.append(Barrier(labels.get(buffer.name, buffer.name), index, offset, count,
                                    tuple(waits_by_offset.get(offset, ()))))
    return barriers


def format_barrier_map(barriers: list[Barrier]) -> list[str]:
    if not barriers:
        return ["no mbarriers in this kernel: nothing to watch"]
    lines = [f"{'barrier':<16} {'offset':>7} {'init count':>10}  waited at (lines of the generated CUDA)"]
    for b in barriers:
        count = str(b.init_count) if b.init_count is not None else "not found"
        waits = ", ".join(map(str, b.wait_lines)) or "-"
        lines.append(f"{b.label:<16} {hex(b.offset):>7} {count:>10}  {waits}")
    return lines


# ---- the instrumented build ----------------------------------------------------------------------


def instrument(cuda_source: str, records_address: int, bound_s: float = BOUND_S) -> str:
    """The same source, with every mbarrier wait bounded and reporting into records_address."""
    device_code = (
        _DEVICE_CODE.replace("__RECORDS__", hex(records_address))
        .replace("__CAPACITY__", str(CAPACITY))
        .replace("__BOUND_NS__", str(int(bound_s * 1e9)))
        .replace("__HEADER_WORDS__", str(HEADER_WORDS))
        .replace("__RECORD_WORDS__", str(RECORD_WORDS))
    )
    macros = [
        f"#define {helper}(bar, phase) tirx_locator_wait({address}, (phase), __LINE__, {cluster})"
        for helper, (address, cluster) in WAIT_HELPERS.items()
    ]
    return instrument_module.splice(cuda_source, device_code, macros)


@contextlib.contextmanager
def instrumented(records_address: int, bound_s: float = BOUND_S):
    """Within this block, every CUDA build TVM makes is the debug build."""
    with instrument_module.cuda_postproc(lambda code: instrument(code, records_address, bound_s)):
        yield


@dataclass
class DebugBuild:
    executable: object
    cuda_source: str  # the instrumented source
    barriers: list[Barrier]


def build_debug(factory, spec, shape: Shape, arch: str, sm_count: int, records_address: int,
                bound_s: float = BOUND_S) -> DebugBuild:
    built = instrument_module.build_instrumented(
        factory, spec, shape, arch, sm_count, lambda code: instrument(code, records_address, bound_s)
    )
    labels = source_labels(factory, built.tir_script)
    return DebugBuild(built.executable, built.cuda_source, barrier_map(built.tir_script, built.plain_source, labels))


def _strip_instrumentation(source: str) -> str:
    """The plain source back from the instrumented one (for line numbers and the barrier map)."""
    start = source.index("#line 1\n") + len("#line 1\n")
    body = source[start:]
    return re.sub(r"(?m)^#define tvm_builtin_cuda_mbarrier_wait\w*\(bar, phase\).*\n|^#line \d+\n", "", body)


def compile_cubin(cuda_source: str, arch: str) -> bytes:
    """nvcc -cubin: proof that the debug build assembles for the arch (no GPU needed)."""
    return instrument_module.compile_cubin(cuda_source, arch, "the debug build")


# ---- the records ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Record:
    cta: tuple[int, int, int]
    grid: tuple[int, int]
    cluster_rank: int
    thread: int
    barrier_offset: int  # bytes from the start of dynamic shared memory
    phase: int  # the parity the wait waited for
    current_parity: int
    pending: int
    line: int
    word: int
    start_ns: int

    @property
    def cta_number(self) -> int:
        return self.cta[0] + self.grid[0] * (self.cta[1] + self.grid[1] * self.cta[2])

    @property
    def warp(self) -> int:
        return self.thread // 32

    @property
    def lane(self) -> int:
        return self.thread % 32


def decode(words) -> tuple[list[Record], bool]:
    """Records from the buffer's 32-bit words, in the order their slots were taken; and whether it overflowed."""
    import numpy as np

    words = np.asarray(words, dtype=np.uint64)
    table = words[HEADER_WORDS: HEADER_WORDS + CAPACITY * RECORD_WORDS].reshape(-1, RECORD_WORDS)
    records = [
        Record(
            cta=(int(r[CTA_X]), int(r[CTA_Y]), int(r[CTA_Z])),
            grid=(int(r[GRID_X]), int(r[GRID_Y])),
            cluster_rank=int(r[CLUSTER_RANK]),
            thread=int(r[THREAD]),
            barrier_offset=int(r[BAR_ADDR]) - int(r[SMEM_BASE]),
            phase=int(r[PHASE]),
            current_parity=1 if r[CURRENT_PARITY] else 0,
            pending=int(r[PENDING]),
            line=int(r[LINE]),
            word=int(r[WORD_LO]) | (int(r[WORD_HI]) << 32),
            start_ns=int(r[START_LO]) | (int(r[START_HI]) << 32),
        )
        for r in table[table[:, VALID] == 1]
    ]
    return records, bool(words[0] == 1)


def _ranges(numbers) -> str:
    numbers = sorted(set(numbers))
    parts, start = [], None
    for i, n in enumerate(numbers):
        if start is None:
            start = n
        if i + 1 == len(numbers) or numbers[i + 1] != n + 1:
            parts.append(str(start) if start == n else f"{start}-{n}")
            start = None
    return ",".join(parts)


def _who(threads: set[int]) -> str:
    """'warps 0-3 (all lanes)' or 'warp 4 (lane 0)' for a set of threads of one CTA."""
    by_warp: dict[int, set[int]] = {}
    for t in threads:
        by_warp.setdefault(t // 32, set()).add(t % 32)
    lane_sets = {frozenset(lanes) for lanes in by_warp.values()}
    warps = _ranges(by_warp)
    noun = "warp" if len(by_warp) == 1 else "warps"
    if len(lane_sets) == 1:
        lanes = next(iter(lane_sets))
        lane_text = "all lanes" if len(lanes) == 32 else f"lane{'s' if len(lanes) > 1 else ''} {_ranges(lanes)}"
        return f"{noun} {warps} ({lane_text})"
    return f"{noun} {warps} (threads {_ranges(threads)})"


def _readable_pending(pending: int, init_count: int | None) -> int | None:
    """The pending count, if the raw word plausibly held one (see the module docstring), else None."""
    return pending if init_count is not None and 0 <= pending <= init_count else None


def _meaning(pending: int | None, init_count: int | None) -> str:
    if pending is None:
        return ("the phase never completed: compare who arrives on this barrier (and how many bytes its TMA "
                "loads deliver) with its init count, its expect_tx bytes and the phases each side waits for")
    if pending == 0:
        return ("every arrival came but the transaction bytes did not: the expect_tx byte count is larger than "
                "what the TMA loads into this barrier deliver, or a load never signals it (copy_async without "
                "dispatch='tma_auto', or issued on another barrier)")
    if init_count is not None and pending == init_count:
        return ("nobody arrived in this phase: the arrive (or the TMA/commit that arrives) was never issued for it "
                "(a loop that issues fewer times than this one waits, a branch that skips it), or this wait is "
                "one phase ahead of its producer (its starting phase or its phase flips)")
    if init_count is not None and pending < init_count:
        return (f"{init_count - pending} of {init_count} arrivals came: the barrier expects more arrivals per phase "
                "than its producers make (the init count, or the number of arriving threads)")
    return "the phase never completed: compare who arrives on this barrier with its init count and phases"


def summarize(records: list[Record], barriers: list[Barrier], max_groups: int = 4) -> list[str]:
    """Grouped lines, earliest-giving-up group first: who waited on what, what state it was in."""
    by_offset = {b.offset: b for b in barriers}
    groups: dict[tuple, list[Record]] = {}
    for r in records:
        key = (r.barrier_offset, r.phase, r.current_parity, r.pending, r.line)
        groups.setdefault(key, []).append(r)
    ordered = sorted(groups.values(), key=lambda rs: min(r.start_ns for r in rs))
    lines = []
    for group in ordered[:max_groups]:
        first = group[0]
        barrier = by_offset.get(first.barrier_offset)
        name = barrier.label if barrier else f"shared memory +{hex(first.barrier_offset)} (no mbarrier of the kernel)"
        init = barrier.init_count if barrier else None
        threads_by_cta: dict[int, set[int]] = {}
        for r in group:
            threads_by_cta.setdefault(r.cta_number, set()).add(r.thread)
        by_pattern: dict[str, list[int]] = {}
        for cta, threads in threads_by_cta.items():
            by_pattern.setdefault(_who(threads), []).append(cta)
        where = "; ".join(f"CTA {_ranges(ctas)}, {who}" for who, ctas in by_pattern.items())
        pending = _readable_pending(first.pending, init)
        if first.current_parity != first.phase:
            state = f"it had just moved on to phase {first.current_parity} as the wait gave up"
        elif pending is None:
            state = f"it is still in phase {first.phase} (its pending arrival count could not be read)"
        else:
            plural = "" if pending == 1 else "s"
            state = f"it is still in phase {first.phase} with {pending} of {init} pending arrival{plural}"
        lines.append(
            f"{where}: waited on {name} for phase {first.phase} to complete "
            f"(line {first.line} of the generated CUDA); {state}"
        )
        lines.append(f"  usually: {_meaning(pending, init)}")
    if len(ordered) > max_groups:
        later = sum(len(g) for g in ordered[max_groups:])
        lines.append(f"({later} later waits gave up too, most likely as a consequence of the ones above)")
    if records:
        grid_x, grid_y = records[0].grid
        numbering = f"; CTA numbers are x + {grid_x}*y on the {grid_x}x{grid_y} grid" if grid_y > 1 else ""
        lines.append(f"(phases are parities, 0 or 1{numbering})")
    return lines
