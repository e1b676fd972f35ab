"""The step notebooks' text that states a step's reference design, steps 4-12 of both tracks.

`notebooks/walkthrough.explain(topic)` renders TEXT[track][topic] and `walkthrough.show_emitted(step, shape)`
greps the generated code for EMITTED[track][step]: (artifact field, regular expression, how many lines).

Why this file is in solutions/ and not in notebooks/: every text here answers what a step's skeleton asks
the student to design (barrier counts, who arrives and who waits, starting phases, the order stages are
released in, the fences, the solution's values such as PIPE_DEPTH or CTAS_PER_SM), and the grep patterns
point at the instructions that protocol emits. It ships with the solutions and is withheld with them
(like blackwell/PROTOCOL_SOURCES.md): a course handed out without solutions/ shows one line in its place
(`notebooks/track_text.py` says which), to be read after the step passes `make grade`.
"""

from __future__ import annotations

_TMA_LOADS = """\
The Tensor Memory Accelerator copies a whole box of a tensor between global and shared memory,
swizzling on the way, issued by **one** thread. The thread first *arms* an mbarrier with the number
of bytes to expect (`mbarrier.arrive.expect_tx`, 32 KiB: one 128x64 fp16 tile of A and one of B),
then issues the two copies; the TMA engine counts bytes into the barrier as they land, and the
barrier's phase completes when all have arrived."""

_STAGE_PHASES = """

Each stage has its own mbarrier and its own phase bit: with an odd number of K tiles the two
stages are used a different number of times, so a single shared phase would be wrong."""

# topics whose text is the same in both tracks
_BOTH_TRACKS: dict[str, str] = {
    "4-code": """\
The synchronous `Tx.cta.copy` becomes an elected thread's
`Tx.copy_async(..., dispatch="tma_auto", mbar=...)` with a barrier and its phase.""",
    "5-code": "Buffers gain a stage dimension; the loop prefetches two K tiles and refills stage s after its MMA.",
    "5-try": """\
Set `PIPE_DEPTH = 3` in a copy of the solution: three stages of 32 KiB still fit (with Dsmem) in
shared memory, but fewer CTAs fit per SM. In the drawn timeline above, change `stages=2` to 3 and
`Durations(load=...)`: the waits vanish once `stages x mma >= load + mma`.""",
    "6": """\
On Hopper an SM holds two of this step's CTAs (2 x 97 KiB of shared memory), and keeping both
matters: while one waits for its loads the other computes (one CTA per SM ran at 0.57x cuBLAS on an
H100, two at 0.89x). On Blackwell every CTA allocates all of TMEM, so the grid is one CTA per SM.

Barriers are initialised once per CTA and their phases carry over from tile to tile: resetting
them for each tile is the classic bug (with an odd number of K tiles a stage ends a tile at phase 1).""",
}

TEXT: dict[str, dict[str, str]] = {
    "hopper": {
        **_BOTH_TRACKS,
        "4": _TMA_LOADS + """ Every thread waits on that phase (all four warps
issue the warpgroup-wide wgmma, so none can run a phase ahead), then the MMA reads shared memory.

The epilogue goes the same way backwards: registers -> shared memory (swizzled) -> one TMA store.
The registers that the synchronous loads of step 3 needed are free, and the loads no longer cost
any thread's instructions.""",
        "4-try": """\
In a copy of `solutions/hopper/step04_tma.py`, arm the barrier with half the bytes (`TMA_BYTES // 2`):
the phase completes when half the data has landed, so the MMA can read stale shared memory (wrong
results at random tiles), or the barrier's transaction count goes negative. With a GPU,
`make sanitize STEP=4 IMPL=...` after that change, and `make debug STEP=4` for a hang.""",
        "5": """\
The load of a stage is issued as soon as the MMA that read it is known to be done
(`wgmma.wait_group(0)` on Hopper, a `tcgen05.commit` barrier on Blackwell).""" + _STAGE_PHASES,
        "6-code": "A launch of `CTAS_PER_SM * sm_count` CTAs, the scheduler, and a `while` loop over tiles "
                  "around step 5's body.",
        "7": """\
Steps 5 and 6 have one warpgroup do everything: issue a load, wait for it, multiply, wait for the
MMA, refill, and between tiles write the epilogue while no load is in flight. Step 7 splits the CTA
into two warpgroups with one job each. The **producer** (one elected thread) only issues TMA loads;
the **consumer** (128 threads) only waits, multiplies and writes back. They talk through two rings
of mbarriers, one pair per stage: `tma2mma[s]` ("stage s is full", completed by the TMA bytes) and
`mma2tma[s]` ("stage s may be refilled", arrived by the consumer once the wgmma group that read it is
done). The producer's phase starts at 1, so its first wait on each empty stage passes at once.

With one CTA per SM nothing else hides a stall of the consumer, so it does not wait for its own
wgmmas after every K tile: it issues K tile k, then `wgmma.wait_group(1)` returns when tile k - 1's
group is done, and only then releases stage (k - 1) mod PIPE_DEPTH; after the last K tile it drains
with `wait_group(0)`. Two stages are then held by the consumer, so the ring has four.

The producer needs almost no registers and the consumer holds a 128x128 fp32 accumulator, so the
producer gives registers away with `setmaxnreg.dec` and the consumer takes them with `setmaxnreg.inc`.
Because the producer runs ahead, the next tile's loads land while the consumer writes its epilogue.""",
        "7-code": "Two warpgroups, the producer/consumer branch, two barrier rings with PipelineState phases, "
                  "setmaxnreg, one wgmma group in flight with each stage released a K tile late.",
        "7-try": """\
Start the producer's pipeline state at phase 0 instead of 1 in a copy of the solution: its first
wait on each empty stage then waits for a release that can only come after a load it has not issued
yet, and the kernel hangs. `make check STEP=7 TRACK=hopper IMPL=...` simulates the barriers on the
CPU; `make debug STEP=7 IMPL=...` on a GPU names the barrier and the phase.""",
        "8": """\
With four stages, two of them held by the consumer, the producer can be at most two K tiles ahead;
where a load takes longer than that, the consumer waits. Step 8 makes the ring as deep as shared
memory holds (six stages of 32 KiB beside the 32 KiB Dsmem tile), so the producer can run four K
tiles ahead.""",
        "8-code": "PIPE_DEPTH goes from 4 to the most stages that fit (computed from the shared-memory budget).",
        "8-timeline": """\
A consumer's `mma` bar runs from its wait on `tma2mma[s]` ending to its arrive on `mma2tma[s]` (with one
wgmma group left in flight, that arrive comes after the next K tile is issued, so the bars overlap); a
`stage s: TMA` bar from the producer's expect_tx arrive to the consumer's wait completing.""",
        "8-try": """\
Set `PIPE_DEPTH = 3`: the step stays correct (the ring is stage-count agnostic) and drops to about
0.7x cuBLAS on an H100: with one wgmma group in flight only one stage is left to load ahead. In the drawn timeline, `figures.Durations(load=1400)` (a slower memory
system) brings step 8's waits back until you add stages.""",
        "9": """\
Two CTAs of a cluster compute output tiles that need the same operand. On Hopper they are
vertically adjacent (a 256x128 cluster tile) and share B: each CTA loads its own A tile and **half**
of the B tile, and the TMA *multicasts* that half into the shared memory of both CTAs, so B crosses
from L2 once per cluster. Since a CTA's stage is now filled partly by its peer, a stage may be
refilled only when the consumers of **both** CTAs have released it: `mma2tma[s]` counts 2 arrivals,
one local and one remote (`mbarrier.arrive` on the peer's barrier through a cluster address).
Cluster-wide syncs at the start (the peer's barriers are initialised before anything reaches them)
and at the end (no CTA exits while its peer may still arrive on its barriers) close the protocol.
Measured on an H100, it does not pay at the course's shapes: CTAs that load the same tile at about
the same time already send the L2 only about half of what they ask for, the multicast loads are
combined far less, and step 9 sends the L2 more sectors than step 8; step 10 is no faster for the
cluster either (docs/measurements.md).""",
        "9-code": "A cluster launch, multicast loads of half the B tile, empty barriers counting both CTAs.",
        "9-try": """\
Give `mma2tma` an arrival count of 1 instead of `CLUSTER` in a copy of the solution: a stage is
then refilled when the *faster* CTA has released it, and the multicast overwrites B in the slower
CTA's shared memory while its wgmma still reads it: wrong tiles at random, more often at large K.""",
        "10": """\
The Hopper CTA tile grows to 128x256 and a second consumer warpgroup joins: consumer c multiplies
rows 64c..64c+63 of A with the whole B tile, one `m64n256k16` wgmma per K=16 slice. Both consumers
read the same B stage, so each byte of B brought into shared memory feeds twice the math, and the
wider wgmma reads fewer shared-memory bytes per FLOP. A stage is free when both consumers of both
CTAs have released it (4 arrivals). Each consumer has its own epilogue named barrier: sharing one
barrier id between two warpgroups of 128 threads would let a `bar.sync` complete with a mix of both.""",
        "10-code": "A third warpgroup, 64-row consumer slices, m64n256k16, four arrivals on each empty barrier, "
                   "per-consumer epilogue barriers.",
        "10-try": """\
Give both consumers the same epilogue barrier id (`EPILOGUE_BAR + consumer` -> `EPILOGUE_BAR`): the
kernel still builds and often passes small shapes, but at 4096^3 a consumer can overwrite its
staging tile while the other's TMA store still reads it, and `make sanitize STEP=10` reports it.""",
    },
    "blackwell": {
        **_BOTH_TRACKS,
        "4": _TMA_LOADS + """ On Blackwell the same thread then issues the
`tcgen05.mma` and its commit, so it alone drives both barriers' phases, and it alone waits on them
inside the K loop: a parity wait cannot tell phase n from phase n + 2, so a warp that arrives on
nothing could miss a phase. The other threads wait once, at a CTA barrier after the loop.

The epilogue goes the same way backwards: TMEM -> registers -> shared memory (swizzled) -> one TMA
store. The loads no longer cost any thread's instructions.""",
        "4-try": """\
In a copy of `solutions/blackwell/step04_tma.py`, arm the barrier with half the bytes
(`TILE_BYTES // 2`): the phase completes when half the data has landed, so the MMA can read stale
shared memory. `make check STEP=4 TRACK=blackwell IMPL=...` simulates the barriers on the CPU and
reports the byte count that does not match what the copies deliver.""",
        "5": """\
The load of a stage is issued as soon as the MMA that read it is known to be done (a
`tcgen05.commit` barrier).""" + _STAGE_PHASES,
        "6-code": "A launch of `sm_count` CTAs, the scheduler, and a `while` loop over tiles around step 5's body.",
        "7": """\
Steps 5 and 6 have one elected thread do everything in turn: issue a load, wait for it, issue the
MMA, wait for its commit, refill; and between tiles the whole CTA writes the epilogue while no load
or MMA is in flight. Step 7 gives each job its own warps. The **TMA producer** (one elected thread
of warp 3 of warpgroup 1) only issues loads; the **MMA issuer** (one elected thread of warp 0 of
warpgroup 1) only issues `tcgen05.mma`; the **writeback** (warpgroup 0, 128 threads, thread t owns
row t) reads the accumulator out of TMEM and stores it. Four barriers hand the work over:
`tma2mma[s]` ("stage s has landed": the producer's expect_tx plus the TMA bytes), `mma2tma[s]`
("stage s may be refilled": a `tcgen05.commit` by the MMA issuer, which arrives once the MMAs that
read the stage have finished), `mma2ld` ("the accumulator is complete": a commit after a tile's
last K tile) and `ld2mma` ("TMEM is free again": one arrival from each of the 128 writeback
threads). The producer sides (of mma2tma and ld2mma) start at phase 1, so their first waits pass at
once: the stages and TMEM start free.

The MMA issuer waits only until the writeback has read TMEM out, so the next tile's MMAs run while
the writeback still converts and stores. The accumulator lives in TMEM, not in registers, so no
role needs to give registers to another.""",
        "7-code": "Two warpgroups, three role branches, four barriers (TMABar, TCGen05Bar, MBarrier) with "
                  "PipelineState phases, and a writeback in TMEM chunks on its own named barrier.",
        "7-try": """\
Start the producer's PipelineState at phase 0 instead of 1 in a copy of the solution: its first
wait on each stage then needs a commit from an MMA that waits for a load the producer has not issued
yet, and the kernel hangs. `make check STEP=7 TRACK=blackwell IMPL=...` simulates the barriers on the
CPU and reports the deadlock with the barrier's name.""",
        "8": """\
With four stages the TMA producer can be at most three K tiles ahead of the MMA issuer; where loads
take longer than three K tiles of MMAs (about 0.2 us each at 128x128x64) the tensor core waits. Step 8 makes the ring as deep as shared memory holds: PIPE_DEPTH
is computed from the 227 KiB a CTA may use, the 16 KiB Dsmem chunk and 1 KiB of barriers, six stages
of 32 KiB. Nothing else changes: every PipelineState wraps at PIPE_DEPTH, and `tcgen05.mma` is
asynchronous already (the issuer never waits for its own MMAs; a commit releases each stage). The
public B200 solutions of this step use four stages; six is what fits, not a measured optimum (no
Blackwell GPU was available).""",
        "8-code": "PIPE_DEPTH goes from 4 to the most stages that fit, computed from the shared-memory budget; "
                  "nothing else.",
        "8-timeline": """\
The measured timeline is the Hopper solution's (no Blackwell GPU was available). A consumer's `mma` bar
runs from its wait on `tma2mma[s]` ending to its arrive on `mma2tma[s]` (the Hopper consumer keeps one MMA
group in flight, so that arrive comes after the next K tile is issued, and the bars overlap); a
`stage s: TMA` bar from the producer's expect_tx arrive to the consumer's wait completing.""",
        "8-try": """\
Set `PIPE_DEPTH = 3` in a copy of the solution: the step stays correct (the ring is stage-count
agnostic; `make check STEP=8 TRACK=blackwell IMPL=...` still passes). In the drawn timeline,
`figures.Durations(load=1400)` (a slower memory system) brings step 8's waits back until you add
stages.""",
        "9": """\
Two CTAs on neighbouring SMs form a cluster and compute one 256x256 output tile together. Each CTA
loads its own 128 rows of A and its own 128 rows of B; one thread of CTA 0 issues a single
`tcgen05.mma` with `cta_group=2` (M = 256, N = 256) that reads A and B from both CTAs' shared memory
and accumulates into both CTAs' TMEM. Each CTA fetches half of the B tile it multiplies, and every
MMA instruction does twice the work.

The barriers follow the MMA: both CTAs' loads complete on CTA 0's `tma2mma[s]`, which CTA 0 arms with
the bytes of the pair; CTA 0's commits are multicast to `mma2tma[s]` and `mma2ld` of both CTAs; the
writeback threads of both CTAs arrive on CTA 0's `ld2mma` (256 arrivals, through a cluster address).
Cluster-wide syncs after the barrier init and before TMEM is freed close the protocol.""",
        "9-code": "A cluster launch, TMEM allocated for the pair, cta_group=2 loads onto CTA 0's barrier, one "
                  "cta_group=2 MMA with multicast commits, remote arrives on ld2mma, cluster-wide syncs.",
        "9-try": """\
In a copy of the solution, arm `tma2mma` with one CTA's bytes (`TILE_BYTES` instead of
`TILE_BYTES * CTA_GROUP`): the phase completes before CTA 1's tiles have landed, and the MMA may read
a half-loaded stage. `make check STEP=9 TRACK=blackwell IMPL=...` reports it on the CPU ("expect_tx
announced 32768 bytes, fewer than the copies deliver").""",
        "10": """\
The CTA pair now computes two 256x256 accumulators at once: a third warpgroup holds the TMA thread
and two MMA threads, each accumulating its own 256 rows of a 512x256 cluster tile into its own half
of TMEM (columns 0-255 and 256-511), and two writeback warpgroups each drain one of them through
their own Dsmem tile and their own named barrier. Each B tile loaded feeds two MMAs, and while one
accumulator is written back the tensor core works on the other. A stage is free once both MMA
threads' commits have arrived (`mma2tma[s]` counts 2); a stage is 48 KiB now, so the ring holds four.""",
        "10-code": "A third warpgroup, two MMA issuers with their own halves of TMEM, mma2ld and ld2mma per "
                   "consumer, mma2tma counting both commits, two Dsmem tiles and named barriers.",
        "10-try": """\
Give both writeback warpgroups the same named barrier (`WB_BARRIER + wg_id` -> `WB_BARRIER`): a
256-thread rendezvous of a barrier declared for 128 lets one warpgroup's threads pass with the
other's, and their Dsmem hand-offs mix.""",
    },
}

# ---- steps 11 and 12 (notebooks/11_12_ragged_edges_and_stream_k.ipynb) ----------------------------------------

_RAGGED_COMMON = """\
Three changes to step 10, and no new barrier:

1. **Counts round up.** The cluster tiles are `ceil(M / tile_m) x ceil(N / tile_n)` and a tile has
   `ceil(K / 64)` K tiles; the last tile of a row or column hangs over the matrix (at M = 1000 and
   256-row cluster tiles, the fourth row of tiles covers rows 768-1023, 24 of them past the end).
2. **Loads fill the overhang with zeros.** A TMA box that reaches past the tensor map's extent is
   filled with zeros by the hardware, and a zero row of A or B adds nothing to a dot product, so the
   MMA loop is unchanged. The barrier is still armed with the **whole box's bytes**: the TMA engine
   counts every byte of the box into the mbarrier, zeros included, so an `expect_tx` of only the bytes
   inside the matrix would not match what arrives (the phase completes at the wrong time, or never).
3. **Stores are clipped.** A TMA store writes only the rows and columns inside the tensor map's
   extent: nothing past the matrix is touched, with no bounds check in the kernel.

Why `dispatch="tma_explicit"`: each copy becomes one tensor map of the **whole** matrix with its true
extents, whatever the shape, and the hardware does the clipping. TIRx's `tma_auto` searches a mapping per
shape and refuses some ragged ones. N and K must be multiples of 8 because a tensor map's row stride
must be a multiple of 16 bytes (8 fp16); M may be anything from 1."""

# how a plan deals the K iterations: the same on both tracks
_DEAL = """\
Data-parallel, split-K and stream-K are not three kernels but three outputs of this one plan
(`Decomposition`): the first `sk_tiles` tiles (in the scheduler's order) have their
`sk_tiles x k_tiles` iterations cut into `sk_units` contiguous ranges, one per cluster, the first
`extra` ranges one iteration longer; the remaining tiles are dealt whole, round robin. `sk_tiles = 0`
is data-parallel; `splits > 0` is split-K, each tile's K tiles cut apart into `splits` ranges (equal, or the
first `k_tiles % splits` one K tile longer); anything else is stream-K (CUTLASS's sm90 rule: the last partial wave plus one full wave, ranges of at least 8 K
tiles, `MIN_K_TILES_PER_UNIT`)."""

_STEP_12_PLAN = """\
The unit of work becomes **(cluster tile, range of K tiles)**, and the host decides per shape, before
the kernel is built (`plan_decomposition`), how the K iterations of all tiles are dealt to the
persistent clusters. It tries every CTA height (128 rows, its consumers 64 each; or, where M <= 192 or
K % 16 != 0, 64 rows, its consumers half the columns each), every cluster size (one CTA alone, a plain launch, or a
CTA pair sharing B) and every tile width (`TILE_WIDTHS`: the multiples of 16 from 32 to 256 columns), each as whole
tiles, as stream-K and, where the tiles are at most half the clusters, as split-K (`split_k`: every tile's K tiles in
S ranges, equal or one K tile longer; on Hopper for lone CTAs and swapped tiles too), and keeps the plan that finishes first by a cost model: its **busiest cluster's**
K iterations at `iteration_cost(rows, w, cluster, rows_aligned)` each (a smooth maximum of the wgmma's
rows x w / 32 cycles, the 2(rows + w) cycles its operands take to arrive and, where K % 16 != 0 leaves every
other row of A and B off a 32-byte boundary, the TMA unit's 3.3 cycles for each row the CTA issues, half of B in
a pair; fitted to the times measured on an H200), plus each tile's writeback, plus `fixup_cost` for a cluster that
shares a tile (Hopper prices split-K's partial sums at a seventh of it, `SPLIT_K_FIXUP_COST`); and the plan's `dram_cost` (A, B and D once, stream-K's partial sums once) weighed with it.
Stream-K over every tile must win by `STREAM_K_MARGIN` (15%), since at large K it costs more than the model
counts; split-K by `SPLIT_K_MARGIN` (1%): none of its ranges begins in one tile and ends in the next, and a tile
has S contributors, not three where two would do (256x3584x14336 on an H200: split-K x2 0.95x cuBLAS, stream-K
0.89x; cuBLAS runs split-K x2 there). At most 128 tokens (`FEW_TOKENS`, Hopper) every plan streams B from DRAM
and the GPU ranked the plans otherwise than the model: there the host weighs only 64-row CTAs, straight, and
split-K must win by `FEW_TOKENS_SPLIT_K_MARGIN` (3%; 128x4096x14336: whole 64x64 tiles 1.03x cuBLAS, split-K over
128x96 ones 0.97x).

""" + _DEAL

_STEP_12_FIXUP = """\
Clusters that share a tile add their partial sums through global memory, in a fixed order:

- **Workspace.** Each stream-K cluster leaves at most one partial sum (the start of its last tile):
  `partials[cluster, rank, consumer]`, fp32, stored register-major so a warp's 32 stores of one
  register are 128 contiguous bytes. One int32 **lock** per (stream-K tile, CTA rank, consumer) counts
  the K tiles already in the workspace. The host allocates both once, zeroed.
- **Release** (a first or middle range of a tile): every thread stores its partial sums, the
  consumer's named barrier, then one thread does `__threadfence()` and `atomicAdd(lock, k_end -
  k_begin)`. The fence orders the whole warpgroup's stores (made visible by the barrier) before the
  count, GPU-wide.
- **Acquire** (the tile's final range, which ends at its last K tile): one thread spins with
  `ld.acquire.gpu` until the lock equals `k_begin` (every earlier K tile is in), stores 0 into it, then
  the named barrier lets the warpgroup read the partial sums of clusters `first_unit .. cluster-1` **in
  that order** and add them to its own before the writeback. A fixed order means the same bits on every
  run (checked on the H200), though not the bits of a data-parallel tile.
- **Lock reset.** The waiter is the last one to touch its lock, so it sets it back to 0: the next launch
  finds zeros without a memset.

Why a cluster waits only on **lower-index** clusters: the ranges are contiguous and ascend with the
cluster index, so a tile's earlier K tiles belong to lower clusters; and a cluster walks its range
**backwards**, tile by tile, so every piece of its range before the last is a partial sum (or a
whole tile) that waits on nobody, and only the last can be a final range. Cluster 0 never waits; a cluster waits
only on lower clusters, and they have stored their partial sums before anything they do could wait. The grid is what the GPU holds at once (one CTA per
SM), so every cluster waited on is running: no deadlock."""

_STEP_12_COST = """\
Measured on an H200 (experiments/every_shape/run2.json: every decomposition forced at ten shapes):
a whole tile costs about 9 us plus 0.22, 0.30 and 0.58 us per K tile for 64-, 128- and 256-wide
tiles. A stream-K unit's fixup costs on top about 4-7 us (`fixup_cost`: 18, 35 and 70 iterations of
a 64-wide tile): the fp32 partial tile of a CTA is up to 128 KiB, stored and read back through the L2,
plus a drained pipeline between units. At 2048^3, stream-K over 64 tiles on 66 clusters ran 0.84x
cuBLAS where whole tiles ran 0.98x.

So the model mostly picks **narrower whole tiles**: a 64-wide tile does a K tile in 0.39x the time
of a 256-wide one while computing a quarter of it, which pays exactly where the wide tiles leave SMs
idle (256x4096x4096: 64 whole 64-wide tiles per cluster pair, 1.007x cuBLAS, against stream-K's
0.904x). Stream-K wins where K is long enough to hide its fixup (256x4096x14336: 0.953x against whole
tiles' 0.923x) or the last wave is ragged (256x28672x4096).

**Alone or in pairs.** Of whole tiles that cost the same, the host takes CTAs alone, in a plain
launch. Declaring a cluster rank (`T.cta_id_in_cluster`) makes the launch a cluster launch even for
clusters of one CTA (TVM's launch parameters then hold `clusterCtaIdx`), and a cluster launch places
CTAs otherwise than a plain one: step 8's code launched in clusters ran 2-4% slower from placement
alone (docs/measurements.md); so the kernel declares a rank only for pairs. Measured on an H100, the
same tiles alone against in pairs (experiments/every_shape/h100-plain-launch, one interleaved run per
shape): 2048^3 0.991x cuBLAS against 0.951x, 256x4096x4096 1.059x against 1.002x, 1000x3584x3584
1.005x against 0.966x, 128x4608x3584 0.959x against 0.905x (faster at all 23 layer shapes of 128 to
1000 tokens timed); from 4096^3 on, pairs stayed 0.1-0.8% ahead. Stream-K alone ran 0.66x where pairs ran 0.95x (256x3584x18944), so stream-K stays in pairs.

Widths between the powers of two pay where none of 64, 128 and 256 divides the work into about one
tile per cluster (measured on an H100, experiments/every_shape/h100-widths, one interleaved run per
shape): 256x4608x3584 in 80-wide tiles (58 pair tiles for 66 pairs) ran 0.878x cuBLAS, where 128-wide
tiles (36) ran 0.798x; 256x6144x4096 in 96-wide tiles 0.952x against 0.898x; 1000x6144x4096 in
192-wide tiles 0.998x against 0.902x; 128x3584x3584 in 32-wide tiles of one CTA (112 tiles) 0.892x,
where stream-K over 64-wide tiles ran 0.812x. A width that is not a multiple of 64 stores its last
16, 32 or 48 columns through an unswizzled staging tile in 8-column TMA boxes (a box under the
128-byte swizzle spans 64 columns).

At 128 tokens a 128-row tile holds every row of A, and each of its K tiles brings 128 x 64 of A into
the SM for only w columns of output. A **64-row** CTA, its two consumers on half the columns each,
brings half as much A per output; in pairs that share (multicast) the weight tile it ran
128x4096x14336 at 1.062x cuBLAS where stream-K over 128-row tiles ran 0.947x, and 128x3584x3584 at
0.907x against 0.881x. At 256 tokens it ran slower (0.903x against 0.961x at 256x4096x4096), so the
host weighs it only where M <= 192 (three 64-row tiles pad fewer rows there than two 128-row ones: 192x8192x28672
1.02x against 0.89x, H200), or where K % 16 != 0 (there a pair of them issues fewer rows a K tile than a
pair of 128-row CTAs: 256x4096x4088 0.98x against 0.82x, H200). What did not pay: a pair side by side along N that multicasts the
activation tile (0.858x against 0.895x at 128x3584x3584). ncu says why: both step 12 and cuBLAS take
in about 56 bytes a cycle per SM, and a multicast saves reads from the L2, not bytes into an SM.

Below 64 tokens (decode) even a 64-row box of A is mostly rows past the matrix, and TMA fills each of
them with zeros, at about 2.8 cycles a row and K tile (H200): at 1x4096x14336 those rows, not the
weights, set the time (0.65x cuBLAS; the same plan ran 1.06x at 64 tokens). The same holds for the last
row of tiles of any ragged M and the last column of a ragged N: 136x4096x14336 took twice the time of
256x4096x14336 with the same tiles. So no box reaches past the matrix: the box that holds A's last row is
`A_TAIL = M % BLK_M` rows tall (B's, `B_TAIL`), a second copy with its own descriptor (TODO 12.10); the
stage keeps its rows for the wgmma, and the stale rows past the box reach only accumulator rows past M or
columns past N, which the TMA store clips. One thing must stay: in a pair, a CTA whose half of B lies
wholly past N still loads some rows of B, or its peer's stage no longer waits on its producer and the
peer may lap it. Nine decode shapes: 0.77x -> 1.00x cuBLAS; 136x4096x14336 0.42x -> 0.95x,
200x4096x14336 0.58x -> 0.95x (H200).

**Which way the tile faces.** A wgmma's m is 64 rows a warpgroup; its n is any multiple of 8. At 136 tokens
through a 28672-wide layer every straight plan pads the tokens (three 64-row tiles hold 192 rows) and loads
each weight tile once per row of tiles; cuBLAS runs `nvjet_sm90_hsh_256x136_...` there, the 136 on the
tokens' side (its column-major D^T). The host weighs the transposed problem too, D^T = B A^T (N x M: the
kernel's rows from B, its columns from A), in tiles at least 128 wide and not as stream-K over every tile,
and the writeback stages a consumer's 64 x n part of D^T transposed into D's n x 64 block, one box.
136x28672x8192 0.83x -> 0.97x cuBLAS, 516x22016x4096 0.80x -> 0.94x; over 18 layer shapes of 129-1079
tokens drawn apart from the rule, 0.902x -> 0.963x in geometric mean (H200)."""

_STEP_12_CODE = """\
Host code at module level: the `Decomposition` dataclass, `plan_decomposition` and `stream_k`, and
`WorkUnits` (a cluster's walk: init, next, valid, first_unit). In the kernel: the plan's width and
cluster size, two more parameters (`partials`, `locks`), the unit loop in place of the tile loop (the
producer and the consumers walk the same units), boxes cut at the matrix's edges, the MMA at the plan's width,
and at the end of a unit either the partial store and release or the wait and the adds before step 11's
writeback (or, where A and B are swapped, a transposed one)."""

_STEP_12_TRY = """\
Number the clusters from the last CTA (`cluster = T.meta_var((sm_count - 1 - bx) // CLUSTER)`): a
tile's final range then waits on a cluster with a higher index, which the checker reports
(`hopper-12-fixup-waits-on-a-later-cta` in tests/known_bad.py). Or, on the CPU, set `STREAM_K_MARGIN
= 1.0` in a copy of the solution and print the plans above again: which shapes switch to stream-K,
and what did experiments/every_shape measure for them?"""

_STEP_12 = {"12": _STEP_12_PLAN, "12-fixup": _STEP_12_FIXUP, "12-cost": _STEP_12_COST, "12-code": _STEP_12_CODE,
            "12-try": _STEP_12_TRY}

_BLACKWELL_STEP_12_PLAN = """\
The unit of work becomes **(cluster tile, range of K tiles)**, and the host decides per shape, before
the kernel is built (`plan_decomposition`), how the K iterations of all tiles are dealt to the
persistent clusters. The cluster tile stays step 11's: a CTA pair whose two MMA threads each issue one
`tcgen05.mma.cta_group::2` of 256x256 per K tile, **512x256** in all. Hopper's step 12 also weighs
narrower tiles and lone CTAs; here `CLUSTER_SIZES` and `TILE_WIDTHS` hold one value each (the pair's
MMA is 256 wide, and a lone CTA would give up `cta_group::2`), so the plan is **whole tiles, stream-K or
split-K**, and the kernel asserts that a plan it is given keeps the pair tile. The host keeps the plan
whose **busiest cluster** finishes first by a cost model (`ITERATION_COST` per K iteration, plus
`FIXUP_COST` for a cluster that shares a tile, S - 1 of them for a split-K tile's final range); stream-K must
win by `STREAM_K_MARGIN` (15%), split-K by `SPLIT_K_MARGIN` (1%). The
constants are Hopper's, measured on an H200, and **unmeasured on Blackwell**: with one tile width only
their ratio counts, a fixup priced at about 27 K iterations.

""" + _DEAL

_BLACKWELL_STEP_12_FIXUP = """\
Clusters that share a tile add their partial sums through global memory, in a fixed order. On Blackwell
the accumulator is in TMEM, so the writeback warpgroups do the fixup, one 64-column chunk at a time:

- **Workspace.** Each stream-K cluster leaves at most one partial sum (the start of its last tile):
  `partials[cluster, rank, j]` for writeback warpgroup j of CTA `rank`, 256 fp32 columns of its 128
  rows, stored `[column, thread]` so a warp's 32 stores of one register are 128 contiguous bytes: 512 KiB
  per stream-K cluster, up to 37 MiB at 148 SMs. One int32 **lock** per (stream-K tile, CTA, writeback
  warpgroup) counts the K tiles already in the workspace. The host allocates both once, zeroed.
- **TMEM handed back before the fixup** (a first or middle range of a tile): the warpgroup reads its
  accumulator out of TMEM in step 11's four chunks of 64 columns (`tcgen05.ld`) and, right after the last
  chunk's read, arrives on CTA 0's `ld2mma` as step 11 does: the MMA thread may start the next unit in the
  same TMEM columns while this one's partial sums are still being stored.
- **Release**: every thread stores its chunks' registers, the warpgroup's named barrier, then one thread
  does `__threadfence()` and `atomicAdd(lock, k_end - k_begin)`. The fence orders the whole warpgroup's
  stores (ordered at CTA scope by the barrier) before the count, GPU-wide. Nothing is stored to D.
- **Acquire** (the tile's final range, which ends at its last K tile): one thread spins with
  `ld.acquire.gpu` until the lock equals `k_begin` (every earlier K tile is in), stores 0 into it, then the
  named barrier lets the warpgroup go on. It spins **before** it waits on `mma2ld`, **while the final
  range's own MMAs run**: its TMEM was handed back at the end of its previous unit, so the cluster's TMA
  and MMA threads go on with the final range meanwhile, and only the cluster's next unit waits for the
  spin (on `ld2mma`). Then each chunk, read out of TMEM, adds the partial sums of clusters `first_unit ..
  cluster-1` **in that order** before step 11's writeback of the chunk. A fixed order means the same bits
  on every run (on a GPU: not yet seen, never run), though not the bits of a data-parallel tile.
- **Lock reset.** The waiter is the last one to touch its lock, so it sets it back to 0: the next launch
  finds zeros without a memset.

Why a cluster waits only on **lower-index** clusters: the ranges are contiguous and ascend with the
cluster index, so a tile's earlier K tiles belong to lower clusters; and a cluster walks its range
**backwards**, tile by tile, so every piece of its range before the last is a partial sum (or a whole
tile) that waits on nobody, and only the last can be a final range. Cluster 0 never waits; a cluster waits
only on lower clusters, and they have stored their partial sums before anything they do could wait. The
grid is one CTA per SM, `sm_count // 2` pairs, one per TPC of a GPU whose TPCs are all whole (a B200's 148
SMs are 74 TPCs), so every cluster waited on is running: no deadlock."""

_BLACKWELL_STEP_12_COST = """\
Nothing of Blackwell's step 12 has been timed: no Blackwell GPU has run this course's kernels. The table
above is Hopper's kernel on an H200. Blackwell's cost model takes Hopper's constants for 256-wide tiles
(`ITERATION_COST[256] = 2.6`, `FIXUP_COST[256] = 70`), a documented guess: a unit's fixup priced at about
27 K iterations. On the H200 a stream-K unit's fixup cost about 4-7 us (the fp32 partial tile stored and
read back through the L2, plus a drained pipeline between units); Blackwell's partial tile is larger (512
KiB per cluster), while handing TMEM back before the stores keeps the MMA busy. How close 27 K iterations
is to the truth is for a B200 to say.

So the model keeps **whole tiles** where they fill the waves well enough (4096^3: 128 tiles on 74 clusters;
2048^3: 32 tiles) and takes **stream-K** where whole tiles leave most clusters idle: 256 tokens through a
4096-wide layer (16 tiles of 64 K tiles: their 1024 K iterations dealt to all 74 clusters, 13 or 14 each)
and 1000 tokens (32 tiles). Hopper answered 256 tokens with narrower whole tiles (1.007x cuBLAS on the
H200, against stream-K's 0.904x), which this kernel's pair MMA does not offer: whether stream-K makes up
for it on Blackwell is unmeasured."""

_BLACKWELL_STEP_12_CODE = """\
Host code at module level: the `Decomposition` dataclass, `plan_decomposition` and `stream_k` (Hopper's,
with one cluster size and one tile width), and `WorkUnits` (a cluster's walk: init, next, valid,
first_unit). In the kernel: the plan's K tiles and an assert that it keeps the 512x256 pair tile, two more
parameters (`partials`, `locks`), the unit loop in place of the tile loop (the TMA thread, both MMA threads
and both writeback warpgroups of both CTAs walk the same units), the MMA's accumulate flag cleared at the
unit's first K tile, and in the writeback: the lock wait before `mma2ld` for a tile's final range, the TMEM
read into partial sums and the release for the other ranges, and the adds into each chunk before step 11's
writeback."""

_BLACKWELL_STEP_12_TRY = """\
Number the clusters from the last CTA (`cluster = T.meta_var((sm_count - 1 - bx) // CTA_GROUP)`): a tile's
final range then waits on a cluster with a higher index, which the checker reports
(`blackwell-12-fixup-waits-on-a-later-cta` in tests/known_bad.py). Or take out the named barrier after the
lock wait: the warpgroup's other threads then read the partial sums as soon as `mma2ld` lets them through,
before the thread that waited has seen the count (`blackwell-12-partials-read-before-the-barrier`). Or, on
the CPU, set `FIXUP_COST = {256: 35.0}` in a copy of the solution and print the plans above again: the
constants are a guess on Blackwell, so which shapes would a cheaper fixup move to stream-K?"""

_STEP_12_BLACKWELL = {"12": _BLACKWELL_STEP_12_PLAN, "12-fixup": _BLACKWELL_STEP_12_FIXUP,
                      "12-cost": _BLACKWELL_STEP_12_COST, "12-code": _BLACKWELL_STEP_12_CODE,
                      "12-try": _BLACKWELL_STEP_12_TRY}

TEXT["hopper"].update({
    "11": """\
Step 10 takes only M and N that are multiples of its 256x256 cluster tile. """ + _RAGGED_COMMON + """

On Hopper each CTA's `tma2mma[s]` is armed with the whole 48 KiB (its A box and both B halves), and a
CTA of the pair whose rows lie wholly past M (at M = 1, CTA 1) still loads its zeros, multiplies, arrives
on both CTAs' `mma2tma` and stores nothing: skipping its work would leave its peer's empty barrier one
arrival short, a hang. An explicit tensor map's box is at most one 128-byte swizzle row wide, so each
consumer stores its rows in 64-column parts.""",
    "11-code": 'Ceiling division in the tile and K-tile counts, `dispatch="tma_explicit"` on every TMA copy, and '
               "the store in 64-column parts; the barriers and their byte counts are step 10's.",
    "11-try": """\
Drop `+ rank * BLK_M` from `m_st` in a copy of the solution (both CTAs of a pair then compute the same
rows): it builds and the barriers are fine, but half of D is never written. The protocol checker, which
follows every TMA box of the first clusters' tiles, names it (`hopper-11-partner-on-the-same-rows` in
tests/known_bad.py).""",
    **_STEP_12,
})
TEXT["blackwell"].update({
    "11": """\
Step 10 takes only M a multiple of its 512-row cluster tile and N of 256. """ + _RAGGED_COMMON + """

On Blackwell CTA 0 arms its `tma2mma[s]` with the whole 98304 bytes of the pair's boxes; at M = 1 three
of the four A boxes of the cluster tile lie wholly past the matrix and arrive as zeros, and each CTA
still loads, waits for its accumulators in TMEM, hands them back on CTA 0's `ld2mma` and stores
nothing: skipping its work would leave a barrier of CTA 0 short of bytes or arrivals. With these
64-column boxes `tma_auto` finds the same tensor maps at most ragged shapes, but refuses a one-row matrix.""",
    "11-code": 'Ceiling division in the tile and K-tile counts and `dispatch="tma_explicit"` on every TMA copy; '
               "the barriers and their byte counts are step 10's.",
    "11-try": """\
Switch the loads back to `dispatch="tma_auto"` in a copy of the solution: at 1000^3 TIRx builds the same
kernel, at M = 1 (the grader's first shape, 1x8x8) it refuses the one-row tensor map and says to use
`tma_explicit` (`blackwell-11-loads-by-tma-auto` in tests/known_bad.py).""",
    **_STEP_12_BLACKWELL,
})

_STEP_4 = [("ptx", r"mbarrier\.arrive\.expect_tx", 2), ("ptx", r"cp\.async\.bulk\.tensor", 3),
           ("sass", r"UTMALDG|UTMASTG|SYNCS", 4)]
_STEP_5 = [("cuda_source", r"mbarrier_wait", 4), ("cuda_source", r"phase_tma_ptr\[\d\] = \(phase_tma_ptr", 2),
           ("sass", r"SYNCS", 3)]
_STEP_6 = [("cuda_source", r"while \(1\)", 2), ("cuda_source", r"_ptr_2\[0\] \+ \d+|< \d+\)\)\) \{ break", 3),
           ("sass", r"HGMMA|UTCHMMA", 2)]
_STEP_9 = [("ptx", r"multicast::cluster", 2), ("ptx", r"barrier\.cluster|mapa", 3),
           ("ptx", r"mbarrier\.arrive.*shared::cluster", 2)]
_STEP_10 = [("sass", r"HGMMA\.64x256x16|UTCHMMA", 2), ("cuda_source", r"__launch_bounds__", 1),
            ("ptx", r"bar\.sync\s+\S+, 128|barrier\.sync\s+\S+, 128", 2)]

EMITTED: dict[str, dict[int, list[tuple[str, str, int]]]] = {
    "hopper": {
        4: _STEP_4, 5: _STEP_5, 6: _STEP_6,
        7: [("ptx", r"setmaxnreg", 2), ("cuda_source", r"__launch_bounds__", 1), ("sass", r"USETMAXREG|SYNCS.ARRIVE", 3)],
        8: [("ptx", r"wgmma\.wait_group\.sync\.aligned\s+1", 2), ("sass", r"WARPGROUP.DEPBAR|HGMMA", 3)],
        9: _STEP_9, 10: _STEP_10,
        11: [("cuda_source", r"CUtensorMap", 1), ("sass", r"UTMALDG|UTMASTG", 3), ("sass", r"HGMMA", 2)],
    },
    "blackwell": {
        4: _STEP_4, 5: _STEP_5, 6: _STEP_6,
        7: [("cuda_source", r"__launch_bounds__", 1), ("ptx", r"tcgen05\.commit", 2),
            ("ptx", r"bar\.sync\s+\S+, 128|barrier\.sync\s+\S+, 128", 1), ("sass", r"UTCHMMA|UTCBAR", 3)],
        8: [("ptx", r"tcgen05\.mma", 2), ("sass", r"UTCHMMA|UTMALDG", 3)],
        9: [("ptx", r"tcgen05\.mma\.cta_group::2", 1), *_STEP_9],
        10: _STEP_10,
        11: [("cuda_source", r"CUtensorMap", 1), ("sass", r"UTMALDG|UTMASTG", 3), ("ptx", r"tcgen05\.mma\.cta_group::2", 1),
             ("sass", r"UTCHMMA", 2)],
    },
}


def units(plan) -> list[tuple[int, int, int, int]]:
    """Step 12's units as (cluster, tile, k_begin, k_end), each cluster's in the order it walks them: its
    stream-K range backwards, tile by tile, then its whole tiles (WorkUnits of both tracks' step12_stream_k.py,
    in plain Python, for the notebook's figure). Tiles are numbered in the scheduler's order."""
    ipu, extra, k_tiles = plan.iterations_per_unit, plan.extra, plan.k_tiles
    splits = getattr(plan, "splits", 0)  # split-K (Hopper): each tile's K tiles in `splits` ranges
    walked = []
    for cluster in range(plan.clusters):
        if cluster < plan.sk_units:
            begin, length = cluster * ipu + min(cluster, extra), ipu + (1 if cluster < extra else 0)
            if splits:
                part = cluster % splits
                begin = cluster // splits * k_tiles + part * (k_tiles // splits) + min(part, k_tiles % splits)
                length = k_tiles // splits + (1 if part < k_tiles % splits else 0)
            cursor = begin + length
            while cursor > begin:
                tile = (cursor - 1) // k_tiles
                k_begin = max(tile * k_tiles, begin) - tile * k_tiles
                walked.append((cluster, tile, k_begin, cursor - tile * k_tiles))
                cursor = tile * k_tiles + k_begin
        walked += [(cluster, tile, 0, k_tiles) for tile in range(plan.sk_tiles + cluster, plan.tiles, plan.clusters)]
    return walked
