"""Protocol lint: single mistakes that build and show every feature, but hang, compute wrong or run slow.

Read off the generated CUDA only (the judge never imports the student's file): each statement of the
kernel body with the `if` guards and loops around it. From that:
- who runs a call: the (warp, lane) pairs whose guards hold; `elect_sync` and `threadIdx.x % 32 == 0`
  narrow to one lane of a warp, a bare warp test does not;
- how often a call runs per output tile: the iterations of the `for` loops inside the tile loop
  (constant bounds after specialisation), with guards on loop variables evaluated;
- what comes before a call in the same loop body: fences, barrier syncs, shared-memory stores.
Guards on anything else (cluster rank, scheduler state) count as true: they narrow CTAs or tiles.
"""

from __future__ import annotations

import ast
import itertools
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Callable, Iterator

from grader.core.build import Artifacts


# ---- the kernel body as statements in context -------------------------------------------------------

@dataclass(frozen=True)
class Loop:
    opened_at: int  # index of the statement that opens it
    is_while: bool  # the tile loop of a persistent kernel
    var: str | None = None  # None: a while loop, or a for loop with bounds not known here
    start: int = 0
    stop: int = 0


@dataclass(frozen=True)
class Statement:
    index: int
    text: str
    guards: tuple[str, ...]  # the C conditions of the enclosing ifs (an else branch: "!(cond)")
    loops: tuple[Loop, ...]  # enclosing loops, outermost first


_FOR = re.compile(r"for \(int (\w+) = (-?\d+); \1 < (-?\d+); \+\+\1\)")


def kernel_body(source: str) -> list[str]:
    """The lines after the kernel's `__global__ ... {` (none if the source has no kernel)."""
    lines = source.splitlines()
    start = next((i for i, line in enumerate(lines) if "__global__" in line and line.rstrip().endswith("{")), None)
    return [] if start is None else lines[start + 1:]


def statements(source: str) -> list[Statement]:
    """Every line of the kernel body with the ifs and loops that enclose it (TVM writes one per line)."""
    out: list[Statement] = []
    stack: list[tuple[str | None, Loop | None]] = []  # per open brace: its guard, or the loop it opens
    for line in kernel_body(source):
        text = line.strip()
        if text == "}" and not stack:
            break  # the kernel's own closing brace
        index = len(out)
        out.append(Statement(index, text, tuple(g for g, _ in stack if g), tuple(l for _, l in stack if l)))
        for position, char in enumerate(text):
            if char == "}":
                closed = stack.pop()[0] if stack else None
                if text[position:].startswith("} else {"):
                    stack.append((f"!({closed})" if closed else None, None))
            elif char == "{" and not text[:position].rstrip().endswith("else"):
                head = text[:position].strip()
                found_if = re.match(r"(?:\}\s*else\s+)?if \((.*)\)\s*$", head)
                found_for = _FOR.match(head)
                if found_if:
                    stack.append((found_if.group(1), None))
                elif found_for:
                    stack.append((None, Loop(index, False, found_for.group(1), int(found_for.group(2)), int(found_for.group(3)))))
                elif head.startswith(("for ", "while ")):
                    stack.append((None, Loop(index, head.startswith("while "))))
                else:
                    stack.append((None, None))
    return out


# ---- evaluating guards ------------------------------------------------------------------------------

class Unknown(Exception):
    """The expression names something this lint does not model."""


_OPERATORS: dict[type, Callable[[int, int], int]] = {
    ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
    ast.FloorDiv: lambda a, b: a // b, ast.Mod: lambda a, b: a % b, ast.BitAnd: lambda a, b: a & b,
    ast.BitOr: lambda a, b: a | b, ast.BitXor: lambda a, b: a ^ b, ast.RShift: lambda a, b: a >> b,
    ast.LShift: lambda a, b: a << min(b, 64), ast.Eq: lambda a, b: int(a == b), ast.NotEq: lambda a, b: int(a != b),
    ast.Lt: lambda a, b: int(a < b), ast.LtE: lambda a, b: int(a <= b), ast.Gt: lambda a, b: int(a > b),
    ast.GtE: lambda a, b: int(a >= b),
}


@lru_cache(maxsize=4096)
def _parse(condition: str) -> ast.AST | None:
    """A C condition as a Python expression tree; the thread index and elect_sync become names."""
    text = re.sub(r"\(\s*(?:int|uint|bool|unsigned int)\s*\)", "", condition)
    text = re.sub(r"tvm_builtin_elect_one_sync_op\(\s*\)", "elect", text)
    text = re.sub(r"tvm_builtin_cuda_thread_rank\(\s*\)|threadIdx\.x", "tid", text)
    text = text.replace("&&", " and ").replace("||", " or ").replace("/", "//")
    text = re.sub(r"!(?!=)", " not ", text)
    try:
        return ast.parse(text.strip(), mode="eval").body
    except SyntaxError:
        return None


def evaluate(condition: str, names: dict[str, int]) -> int:
    """The condition's value under `names`; raises Unknown when it depends on anything else."""
    node = _parse(condition)
    if node is None:
        raise Unknown(condition)
    return _eval(node, names)


def _eval(node: ast.AST, names: dict[str, int]) -> int:
    if isinstance(node, ast.Constant) and isinstance(node.value, int):
        return int(node.value)
    if isinstance(node, ast.Name):
        if node.id not in names:
            raise Unknown(node.id)
        return names[node.id]
    if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
        try:
            return _OPERATORS[type(node.op)](_eval(node.left, names), _eval(node.right, names))
        except ZeroDivisionError as err:
            raise Unknown("division by zero") from err
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return int(not _eval(node.operand, names))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_eval(node.operand, names)
    if isinstance(node, ast.BoolOp):
        values = [_eval(value, names) for value in node.values]
        return int(all(values) if isinstance(node.op, ast.And) else any(values))
    if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _OPERATORS:
        return _OPERATORS[type(node.ops[0])](_eval(node.left, names), _eval(node.comparators[0], names))
    raise Unknown(ast.dump(node))


def _holds(condition: str, names: dict[str, int]) -> bool:
    """A guard this lint cannot evaluate counts as taken."""
    try:
        return bool(evaluate(condition, names))
    except (Unknown, RecursionError):
        return True


# ---- who runs a statement ---------------------------------------------------------------------------

def threads_running(statement: Statement, threads_per_cta: int) -> set[tuple[int, int]]:
    """The (warp, lane) pairs of the CTA that reach the statement. elect_sync picks lane 0 of each warp
    that reaches it (which lane does not matter, only that it is one)."""
    reached = set()
    for thread in range(max(threads_per_cta, 32)):
        warp, lane = divmod(thread, 32)
        names = {"warp_id_in_cta": warp, "tid": thread, "elect": int(lane == 0)}
        if all(_holds(guard, names) for guard in statement.guards):
            reached.add((warp, lane))
    return reached


# ---- how often a statement runs per output tile -----------------------------------------------------

MAX_ITERATIONS = 1 << 16


def _tile_loops(statement: Statement) -> tuple[Loop, ...] | None:
    """The loops inside the tile loop (the innermost while) around the statement; None if one of them
    has bounds this lint does not know."""
    loops = statement.loops
    whiles = [i for i, loop in enumerate(loops) if loop.is_while]
    inner = loops[whiles[-1] + 1:] if whiles else loops
    if any(loop.var is None for loop in inner):
        return None
    total = 1
    for loop in inner:
        total *= max(loop.stop - loop.start, 1)
    return inner if total <= MAX_ITERATIONS else None


def iterations(statement: Statement) -> Iterator[dict[str, int]]:
    """One mapping of loop variables per execution of the statement in one output tile, with guards
    on those variables applied (a statement in an unknown-bound loop yields nothing: see runs_per_tile)."""
    loops = _tile_loops(statement)
    if loops is None:
        return
    ranges = [range(loop.start, loop.stop) for loop in loops]
    for values in itertools.product(*ranges):
        names = {loop.var: value for loop, value in zip(loops, values)}
        if all(_holds(guard, names) for guard in statement.guards):
            yield names


def runs_per_tile(statement: Statement) -> int | None:
    """Executions per output tile by one thread that reaches it; None where a loop bound is unknown."""
    if _tile_loops(statement) is None:
        return None
    return sum(1 for _ in iterations(statement))


# ---- what the rules look for in the generated CUDA --------------------------------------------------

TMA_LOAD = re.compile(r"cp_async_bulk_tensor_g2s")
TMA_STORE = re.compile(r"cp_async_bulk_tensor_s2g")
EXPECT_TX = re.compile(r"mbarrier_arrive_expect_tx")
TCGEN05_MMA = re.compile(r"tcgen05_mma_")
TCGEN05_COMMIT = re.compile(r"tcgen05_commit")
TMEM_LOAD = re.compile(r"tcgen05_ld_")
WGMMA = re.compile(r"wgmma_\w*mma_async")
MMA = re.compile(f"{TCGEN05_MMA.pattern}|{WGMMA.pattern}")
MMA_COMMIT = re.compile(r"wgmma_commit_group|tcgen05_commit")
WGMMA_FENCE = re.compile(r"wgmma_fence")
TCGEN05_AFTER_SYNC = re.compile(r"tcgen05_fence_fence__after_thread_sync")
TCGEN05_BEFORE_SYNC = re.compile(r"tcgen05_fence_fence__before_thread_sync")
PLAIN_ARRIVE = re.compile(r"mbarrier_arrive_arrive_")
PROXY_FENCE = re.compile(r"fence_proxy_proxy_async")
BULK_WAIT = re.compile(r"cp_async_bulk_wait_group")
BULK_COMMIT = re.compile(r"cp_async_bulk_commit_group")
# the exit test of a tile loop: `if (!((v < n))) { break; }`, v the scheduler's tile index
TILE_LOOP_EXIT = re.compile(r"if \(!\(\((\S+) < \d+\)\)\) \{ break; \}")
THREAD_SYNC = re.compile(r"cuda_(?:cta|warpgroup|cluster)_sync|mbarrier_wait|named_barrier|barrier_sync")
BARRIER_WAIT = re.compile(r"mbarrier_wait\(")
# a store into shared memory by the threads themselves (the generic proxy)
SHARED_STORE = re.compile(r"st_vec_shared|st_shared|^\(\(\w+\*\)pool_buf_ptr\)\[.*\] = ")
SLOW_LOAD = re.compile(r"cp_async_(?!bulk)|ld_vec_global")
VECTOR_BYTES = re.compile(r"st_vec_shared_v(\d)_[a-z](\d+)")
SETMAXNREG = re.compile(r"setmaxnreg_(?:dec|inc)_sync_aligned_u32_(\d+)")
# a load or store of local memory in the SASS: what ptxas spills registers to
SPILL = re.compile(r"\b(?:LDL|STL)(?:\.\w+)*\s")
REGISTER_FILE = 65536  # 32-bit registers of one SM (sm_90, sm_100)


def _calls(art: Artifacts, pattern: re.Pattern) -> list[Statement]:
    return [s for s in statements(art.cuda_source) if pattern.search(s.text)]


def _arguments(text: str) -> list[str]:
    """The top-level arguments of the first call on a line."""
    start = text.find("(")
    depth, current, out = 0, "", []
    for char in text[start + 1:]:
        if char in "([":
            depth += 1
        elif char in ")]":
            if depth == 0:
                out.append(current.strip())
                return out
            depth -= 1
        if char == "," and depth == 0:
            out.append(current.strip())
            current = ""
        else:
            current += char
    return out


def _since_loop_start(body: list[Statement], target: Statement) -> list[Statement]:
    """The statements before `target` in its innermost loop's body (or the kernel's), nearest first."""
    first = target.loops[-1].opened_at + 1 if target.loops else 0
    return list(reversed(body[first:target.index]))


def _loop_body(body: list[Statement], loop: Loop) -> list[Statement]:
    return [s for s in body[loop.opened_at + 1:] if loop in s.loops]


# ---- the rules: each takes the artifacts and the number of K tiles, returns True when it holds ----

def every_operand_by_tma(art: Artifacts, k_tiles: int) -> bool:
    """A and B come in by TMA only: each has a tensor map (the kernel's first two parameters, A and B,
    are CUtensorMaps, not pointers), and no cp.async or ld.global copy is left."""
    signature = next((line for line in art.cuda_source.splitlines() if "__global__" in line), "")
    found = re.search(r"\(([^()]*)\)[^()]*$", signature)  # the last parentheses: the parameter list
    parameters = found.group(1).split(",") if found else []
    if len(parameters) < 2 or not all("CUtensorMap" in parameter for parameter in parameters[:2]):
        return False
    return not any(SLOW_LOAD.search(s.text) for s in statements(art.cuda_source))


def every_k_tile_loaded(art: Artifacts, k_tiles: int) -> bool:
    """Each output tile gets at least one TMA load per operand and K tile: 2 * k_tiles loads in all
    (a prologue that fills fewer stages, or a refill loop that stops early, leaves a K tile unloaded)."""
    runs = [runs_per_tile(s) for s in statements(art.cuda_source) if TMA_LOAD.search(s.text)]
    return None in runs or sum(runs) >= 2 * k_tiles


def mma_over_all_k_tiles(art: Artifacts, k_tiles: int) -> bool:
    """The MMA commit runs once per K tile at least: the MMA sits in a loop over all K tiles."""
    runs = [runs_per_tile(s) for s in _calls(art, MMA_COMMIT)]
    return bool(runs) and (None in runs or sum(runs) >= k_tiles)


MMA_K = 16  # the K of one tcgen05.mma or wgmma instruction on fp16: BLK_K // MMA_K of them per K tile


def mma_covers_every_k_tile(art: Artifacts, k_tiles: int) -> bool:
    """Each thread that issues MMAs issues 64 // MMA_K of them per K tile, over all K tiles of the shape
    (K / 64 rounded up): a K loop one trip short leaves the last K columns out of the product."""
    runs = [runs_per_tile(s) for s in _calls(art, MMA)]
    return bool(runs) and (None in runs or sum(runs) >= 64 // MMA_K * k_tiles)


def accumulate_after_first_k_tile(art: Artifacts, k_tiles: int) -> bool:
    """Each MMA's accumulate flag (its last argument) is false at most once per output tile: on the
    first K tile, true on every later one. On Blackwell some MMA must also clear the accumulator
    (TMEM holds the previous tile's sums); a Hopper kernel may zero its accumulator registers instead."""
    cleared, must_clear = 0, bool(_calls(art, TCGEN05_MMA))
    for mma in _calls(art, MMA):
        if runs_per_tile(mma) is None:
            must_clear = False  # not known how often it runs: do not ask for a clearing MMA
            continue
        flag = _arguments(mma.text)[-1]
        falses = sum(1 for names in iterations(mma) if not _holds(flag, names))
        if falses > 1:
            return False
        cleared += falses
    return cleared > 0 or not must_clear


def _ordered_before(body: list[Statement], target: Statement, wanted: re.Pattern, stop: re.Pattern) -> bool:
    """`wanted` appears after the last `stop` before `target`, in the target's loop body."""
    for previous in _since_loop_start(body, target):
        if wanted.search(previous.text):
            return True
        if stop.search(previous.text):
            return False
    return False


def _proxy_fenced(body: list[Statement], target: Statement) -> bool:
    """Shared-memory stores by threads earlier in the loop body are followed, before `target`, by
    fence.proxy.async and then a barrier (what the async proxy, TMA or the tensor core, reads)."""
    seen_sync = False
    for previous in _since_loop_start(body, target):
        if SHARED_STORE.search(previous.text):
            return False
        if THREAD_SYNC.search(previous.text):
            seen_sync = True
        elif PROXY_FENCE.search(previous.text) and seen_sync:
            return True
    return True  # no thread store to fence


def fences_before_mma(art: Artifacts, k_tiles: int) -> bool:
    """Hopper: wgmma.fence since the last commit_group before each wgmma. Blackwell:
    tcgen05.fence::after_thread_sync after the last wait or barrier before each tcgen05.mma.
    Both: operand tiles written by threads are fenced for the async proxy, then synced."""
    body = statements(art.cuda_source)
    for mma in (s for s in body if MMA.search(s.text)):
        if WGMMA.search(mma.text) and not _ordered_before(body, mma, WGMMA_FENCE, MMA_COMMIT):
            return False
        if TCGEN05_MMA.search(mma.text) and not _ordered_before(body, mma, TCGEN05_AFTER_SYNC, THREAD_SYNC):
            return False
        if not _proxy_fenced(body, mma):
            return False
    return True


def tmem_reads_fenced_before_handback(art: Artifacts, k_tiles: int) -> bool:
    """A thread that read TMEM (tcgen05.ld) fences with tcgen05.fence::before_thread_sync before its next
    mbarrier arrive: the arrive hands the accumulator back, and without the fence the MMA that waits on
    it may overwrite columns this thread's loads still read."""
    body = statements(art.cuda_source)
    return all(_ordered_before(body, arrive, TCGEN05_BEFORE_SYNC, TMEM_LOAD) or
               not any(TMEM_LOAD.search(s.text) for s in _since_loop_start(body, arrive))
               for arrive in body if PLAIN_ARRIVE.search(arrive.text))


def fence_before_tma_store(art: Artifacts, k_tiles: int) -> bool:
    """D written to shared memory by threads is fenced for the async proxy and synced before the TMA store."""
    body = statements(art.cuda_source)
    return all(_proxy_fenced(body, store) for store in body if TMA_STORE.search(store.text))


def staging_waited_before_reuse(art: Artifacts, k_tiles: int) -> bool:
    """In a tile loop the staging tile of the TMA store is rewritten for every tile while the previous
    tile's store may still be reading it: before the threads' first store into shared memory after a
    TMA store (or after the tile loop's start), a cp.async.bulk wait and then a barrier."""
    body = statements(art.cuda_source)
    for store in (s for s in body if TMA_STORE.search(s.text)):
        tile_loop = next((loop for loop in store.loops if loop.is_while), None)
        if tile_loop is None:
            continue
        writes = [s for s in _loop_body(body, tile_loop) if SHARED_STORE.search(s.text) and s.index < store.index]
        firsts = [w for w in writes if not any(
            SHARED_STORE.search(s.text) for s in body[_previous_store_or_start(body, w, tile_loop):w.index])]
        for write in firsts:
            seen_sync = False
            for previous in reversed(body[_previous_store_or_start(body, write, tile_loop):write.index]):
                if THREAD_SYNC.search(previous.text):
                    seen_sync = True
                elif BULK_WAIT.search(previous.text) and seen_sync:
                    break
            else:
                return False
    return True


def _previous_store_or_start(body: list[Statement], target: Statement, loop: Loop) -> int:
    """Where the span before `target` that a TMA store's staging reuse depends on begins: just after the
    last TMA store before it in the loop's body, else at the loop's start."""
    start = loop.opened_at + 1
    for s in body[start:target.index]:
        if TMA_STORE.search(s.text):
            start = s.index + 1
    return start



def store_waited_before_exit(art: Artifacts, k_tiles: int) -> bool:
    """Every thread that commits a TMA store waits for its bulk groups (cp.async.bulk.wait_group, or its
    .read form) after its last commit: the store reads shared memory until then, and a CTA that exits
    frees it. wait_group waits for the calling thread's own groups, so the waiter must be the committer."""
    body = statements(art.cuda_source)
    commits = [s for s in body if BULK_COMMIT.search(s.text)]
    if not commits:
        return True
    last = max(s.index for s in commits)
    committers = set().union(*(threads_running(s, art.threads_per_cta) for s in commits))
    waits = [s for s in body if BULK_WAIT.search(s.text) and s.index > last]
    waiters = set().union(set(), *(threads_running(s, art.threads_per_cta) for s in waits))
    return committers <= waiters


def _tile_loop_index(body: list[Statement], loop: Loop) -> str | None:
    """The variable a tile loop runs on: the one its `if (!((v < n))) { break; }` compares."""
    for s in _loop_body(body, loop)[:2]:
        found = TILE_LOOP_EXIT.match(s.text)
        if found:
            return found.group(1)
    return None


def tiles_strided_by_the_grid(art: Artifacts, k_tiles: int) -> bool:
    """A tile loop (a persistent kernel's while loop over its scheduler's tile index) starts the index
    from the CTA's own id and steps it by the number of CTAs (of clusters, with clusters): any other
    start or stride computes some tiles twice and others never, and an index that never steps never ends."""
    body = statements(art.cuda_source)
    ctas = art.grid[0] * art.grid[1] * art.grid[2]
    per_cluster = art.cluster[0] * art.cluster[1] * art.cluster[2]
    for loop in {loop for s in body for loop in s.loops if loop.is_while}:
        index = _tile_loop_index(body, loop)
        if index is None:
            continue
        assigned = re.compile(rf"^{re.escape(index)} = (.*);$")
        starts = [assigned.match(s.text).group(1) for s in body[:loop.opened_at]
                  if assigned.match(s.text) and not any(outer.is_while for outer in s.loops)]
        if not starts or "blockIdx" not in starts[-1]:
            return False
        steps = [assigned.match(s.text).group(1) for s in _loop_body(body, loop) if assigned.match(s.text)]
        strides = [re.fullmatch(rf"\({re.escape(index)} \+ (\d+)\)", step) for step in steps]
        if not strides or not all(strides) or any(int(s.group(1)) * per_cluster != ctas for s in strides):
            return False
    return True


def _assigned_names(statement: Statement) -> set[str]:
    found = re.match(r"(?:[\w:]+\s+)?(\w+)(?:\[[^\]]*\])?\s*=[^=]", statement.text)
    return {found.group(1)} if found else set()


def _coordinate_names(statement: Statement) -> list[set[str]]:
    """The names each coordinate argument of a TMA copy reads (its arguments less the shared-memory address,
    the tensor map and the mbarrier, which all go through a pointer cast)."""
    coordinates = [a for a in _arguments(statement.text) if "tensormap" not in a and "cvta" not in a]
    return [set(re.findall(r"[A-Za-z_]\w*", a)) - {"int", "uint", "bool"} for a in coordinates]


def tma_follows_the_tile(art: Artifacts, k_tiles: int) -> bool:
    """In a tile loop, each TMA load and store addresses the loop's current tile: some coordinate of each
    reads a variable the loop assigns (the scheduler's tile index), and the store writes the tile whose K
    tiles were loaded before it (no variable that both the loads and the store read is assigned between
    the last load and the store)."""
    body = statements(art.cuda_source)
    for copy in (s for s in body if TMA_LOAD.search(s.text) or TMA_STORE.search(s.text)):
        tile_loop = next((loop for loop in reversed(copy.loops) if loop.is_while), None)
        if tile_loop is None:
            continue
        in_loop = _loop_body(body, tile_loop)
        assigned = set().union(*(_assigned_names(s) for s in in_loop))
        names = _coordinate_names(copy)
        if not any(coordinate & assigned for coordinate in names):
            return False
        loads = [s for s in in_loop if TMA_LOAD.search(s.text) and s.index < copy.index]
        if TMA_STORE.search(copy.text) and loads:
            shared = set().union(*names) & set().union(*(name for load in loads for name in _coordinate_names(load)))
            if any(_assigned_names(s) & shared for s in body[loads[-1].index + 1:copy.index]):
                return False
    return True


SMEM_PER_CTA = 227 * 1024  # the most dynamic shared memory one CTA may use on sm_90 and sm_100


def shared_memory_fits(art: Artifacts, k_tiles: int) -> bool:
    """The kernel's shared memory (stages, staging tiles, barriers) fits one CTA: a kernel that asks for
    more is never launched."""
    return art.shared_bytes <= SMEM_PER_CTA


def phases_flip(art: Artifacts, k_tiles: int) -> bool:
    """Each mbarrier wait inside a loop waits on a phase that changes in that loop: the phase names a
    loop variable or a variable assigned in the loop body. A constant phase passes once, then either
    hangs or stops waiting."""
    body = statements(art.cuda_source)
    for wait in (s for s in body if BARRIER_WAIT.search(s.text) and s.loops):
        arguments = _arguments(wait.text)
        phase = arguments[1] if len(arguments) > 1 else ""
        names = set(re.findall(r"[A-Za-z_]\w*", phase)) - {"int", "uint", "bool"}
        loop = wait.loops[-1]
        if any(loop.var in names for loop in wait.loops if loop.var):
            continue
        assigned = any(re.match(rf"(?:\w+\s+)?{re.escape(name)}\b(?:\[[^\]]*\])?\s*=[^=]", s.text)
                       for s in _loop_body(body, loop) for name in names)
        if not assigned:
            return False
    return True


def one_thread(call: re.Pattern, per_warpgroup: int = 1) -> Callable[[Artifacts, int], bool]:
    """The call runs on one lane of each warp that reaches it, and on at most `per_warpgroup` warps
    of each warpgroup (step 10's two consumer roles issue their own)."""

    def holds(art: Artifacts, k_tiles: int) -> bool:
        threads: set[tuple[int, int]] = set()
        for site in _calls(art, call):
            threads |= threads_running(site, art.threads_per_cta)
        warps = {warp for warp, _ in threads}
        if len(threads) > len(warps):
            return False
        return all(sum(1 for w in warps if w // 4 == group) <= per_warpgroup for group in {w // 4 for w in warps})

    return holds


def whole_warpgroups(call: re.Pattern) -> Callable[[Artifacts, int], bool]:
    """A warpgroup-wide instruction (wgmma is .sync.aligned over 128 threads) is reached by every thread
    of each warpgroup that reaches it; under elect_sync or a single-warp test it is undefined or hangs."""

    def holds(art: Artifacts, k_tiles: int) -> bool:
        for site in _calls(art, call):
            threads = threads_running(site, art.threads_per_cta)
            if len(threads) != 128 * len({warp // 4 for warp, _ in threads}):
                return False
        return True

    return holds


def registers_fit_the_file(art: Artifacts, k_tiles: int) -> bool:
    """The per-thread register caps that setmaxnreg gives the warpgroups fit the SM's register file together:
    128 threads x the cap of each warpgroup that runs one. setmaxnreg.inc waits until the CTA has that many
    registers free, so caps that add up to more than the file leave the raising warpgroup waiting forever."""
    caps: dict[int, int] = {}
    for site in _calls(art, SETMAXNREG):
        cap = int(SETMAXNREG.search(site.text).group(1))
        for warpgroup in {warp // 4 for warp, _ in threads_running(site, art.threads_per_cta)}:
            caps[warpgroup] = max(caps.get(warpgroup, 0), cap)
    return 128 * sum(caps.values()) <= REGISTER_FILE


def no_register_spills(art: Artifacts, k_tiles: int) -> bool:
    """No local-memory load or store in the SASS: the registers each thread may use (its setmaxnreg cap) hold
    everything it keeps live, the accumulator first; below that, ptxas spills to local memory (slow)."""
    return SPILL.search(art.sass) is None


def cta_wide_copies(art: Artifacts, k_tiles: int) -> bool:
    """A loop of shared-memory stores run by every thread writes each byte once: its trip count times
    the threads times the vector width fits in the kernel's shared tiles. A thread-scope copy of a
    whole tile (Tx.copy where Tx.cta.copy was meant) is 128x that."""
    shared_bytes = sum(2 * _product(shape) for shape in art.shared_fp16_buffers)
    body = statements(art.cuda_source)
    mma_loops = {loop for s in body if MMA.search(s.text) for loop in s.loops}
    for store in body:
        width = VECTOR_BYTES.search(store.text)
        if width is None:
            continue
        copy_loops = [loop for loop in store.loops if loop not in mma_loops and not loop.is_while]
        if any(loop.var is None for loop in copy_loops):
            continue
        trips = _product(tuple(loop.stop - loop.start for loop in copy_loops))
        if trips * int(width.group(1)) * int(width.group(2)) // 8 * art.threads_per_cta > shared_bytes:
            return False
    return True


def _product(values: tuple[int, ...]) -> int:
    out = 1
    for value in values:
        out *= value
    return out


# ---- step 12: the fixup through global memory (read off the code's order; protocol.py simulates it) ----

ATOMIC_ADD = re.compile(r"tvm_builtin_cuda_atomic_add\(|\batomicAdd\(")
THREAD_FENCE = re.compile(r"tvm_builtin_cuda_thread_fence\(|__threadfence\(")
LD_ACQUIRE = re.compile(r"ld_acquire_gpu_global")


def _global_pointers(art: Artifacts) -> list[str]:
    """The kernel's pointer parameters (step 12: its workspace and its locks); A, B and D are tensor maps."""
    signature = next((line for line in art.cuda_source.splitlines() if "__global__" in line), "")
    return re.findall(r"\w+\*\s*(?:__restrict__\s*)?(\w+)\s*[,)]", signature)


def _locks(art: Artifacts, body: list[Statement]) -> list[str]:
    """The pointer parameters some thread adds to atomically: the counters of a fixup."""
    return [p for p in _global_pointers(art) if any(ATOMIC_ADD.search(s.text) and f"{p}[" in s.text for s in body)]


def _stores_to(text: str, pointers: list[str]) -> bool:
    return any(re.match(rf"{re.escape(p)}\[.*\] = ", text) for p in pointers)


def _plain_reads(text: str, pointer: str) -> bool:
    """`pointer[...]` read as a value: not its address (&(p[...]), not the target of a store."""
    reads = text.split(" = ", 1)[1] if re.match(rf"{re.escape(pointer)}\[.*\] = ", text) else text
    return re.search(rf"(?<!&\(){re.escape(pointer)}\[", reads) is not None


def fixup_count_released(art: Artifacts, k_tiles: int) -> bool:
    """A count added to a lock in global memory is a release: right before the atomic add, a thread fence,
    and before that fence a barrier of the threads whose workspace stores the count covers (walking back
    from the add: fence, then barrier, with no store to global memory in between)."""
    body = statements(art.cuda_source)
    pointers = _global_pointers(art)
    for add in (s for s in body if ATOMIC_ADD.search(s.text)):
        fenced = False
        for previous in reversed(body[:add.index]):
            if not fenced:
                if THREAD_FENCE.search(previous.text):
                    fenced = True
                elif THREAD_SYNC.search(previous.text) or _stores_to(previous.text, pointers):
                    return False
            elif THREAD_SYNC.search(previous.text):
                break
            elif _stores_to(previous.text, pointers):
                return False
        else:
            return False
    return True


def fixup_wait_acquires(art: Artifacts, k_tiles: int) -> bool:
    """A lock is read only by ld.acquire (a plain load may be hoisted out of the spin and orders nothing),
    and the threads that read the workspace pass a barrier after that wait."""
    body = statements(art.cuda_source)
    locks = _locks(art, body)
    if not locks:
        return True
    if not any(LD_ACQUIRE.search(s.text) for s in body):
        return False
    if any(_plain_reads(s.text, lock) for s in body for lock in locks if not ATOMIC_ADD.search(s.text)):
        return False
    workspace = [p for p in _global_pointers(art) if p not in locks]
    for read in (s for s in body if any(_plain_reads(s.text, p) for p in workspace)):
        for previous in reversed(body[:read.index]):
            if THREAD_SYNC.search(previous.text):
                break
            if LD_ACQUIRE.search(previous.text):
                return False
    return True


def fixup_locks_reset(art: Artifacts, k_tiles: int) -> bool:
    """Every lock a launch counts up is stored back to 0 after the wait on it (the host zeroes the locks
    once; the next launch must find them at 0 again)."""
    body = statements(art.cuda_source)
    for lock in _locks(art, body):
        waits = [s.index for s in body if LD_ACQUIRE.search(s.text) and f"{lock}[" in s.text]
        resets = [s.index for s in body if re.match(rf"{re.escape(lock)}\[.*\] = 0;", s.text)]
        if not waits or not any(r > w for w in waits for r in resets):
            return False
    return True
