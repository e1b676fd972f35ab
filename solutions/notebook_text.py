"""The step notebooks' text that states a step's reference design, steps 4-10 of both tracks.

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
    },
    "blackwell": {
        4: _STEP_4, 5: _STEP_5, 6: _STEP_6,
        7: [("cuda_source", r"__launch_bounds__", 1), ("ptx", r"tcgen05\.commit", 2),
            ("ptx", r"bar\.sync\s+\S+, 128|barrier\.sync\s+\S+, 128", 1), ("sass", r"UTCHMMA|UTCBAR", 3)],
        8: [("ptx", r"tcgen05\.mma", 2), ("sass", r"UTCHMMA|UTMALDG", 3)],
        9: [("ptx", r"tcgen05\.mma\.cta_group::2", 1), *_STEP_9],
        10: _STEP_10,
    },
}
