"""Write step 12 with a dynamic tile scheduler under experiments/every_shape/dynamic/dynamic/hopper/: an experiment,
not a step. Where a plan is whole tiles for lone CTAs and there are more tiles than CTAs (4096^3: 512 tiles of
128x256 for 132 CTAs, 3.88 waves), each CTA's first tile is its own number, as in step 12, and every later one is
whichever tile is next when its producer asks: an atomicAdd on a global counter, so that the tiles of the last wave
go to the CTAs that are free first, not to CTAs 0..115 whatever their pace (tail_stamps.py measures that spread).

The protocol it adds (the ring's is unchanged):
  next_tile[2]   shared int32: the producer's next tile, for the consumers
  tile_full[s]   count 1: the producer arrives once it has written next_tile[s]; both consumers' threads wait
                 (phase 0 first)
  tile_empty[s]  count 256: every consumer thread arrives once it has read next_tile[s]; the producer waits before it
                 writes the slot again (phase 1 first: the slots start empty)
  tile_counter   global int32[2], zero at launch: [0] the tiles handed out after the first wave, [1] the CTAs whose
                 producer is done asking; the last of those zeroes both for the next launch (its thread fence orders
                 its last atomicAdd on [0] before the one on [1], so no CTA asks after the reset)
The producer asks for its next tile once it has issued the current tile's loads, a ring's depth ahead of its
consumers: the tile is claimed about four K tiles before the CTA is free.

    python experiments/every_shape/dynamic/make_variant.py
"""

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from variant import write_variant  # noqa: E402

DYNAMIC = [
    ("""        locks: T.Buffer(LOCKS, "int32"),
""", """        locks: T.Buffer(LOCKS, "int32"),
        tile_counter: T.Buffer((2,), "int32"),
"""),
    ("""    # <<< TODO 12.8
""", """    # <<< TODO 12.8
    DYNAMIC = plan.sk_units == 0 and CLUSTER == 1 and plan.tiles > plan.clusters
"""),
    ("""        mma2tma = MBarrier(pool, PIPE_DEPTH)
""", """        mma2tma = MBarrier(pool, PIPE_DEPTH)
        tile_full = MBarrier(pool, 2)
        tile_empty = MBarrier(pool, 2)
        next_tile = pool.alloc((2,), "int32", align=8)
"""),
    ("""        mma2tma.init(CLUSTER * NUM_CONSUMERS)
""", """        mma2tma.init(CLUSTER * NUM_CONSUMERS)
        tile_full.init(1)
        tile_empty.init(NUM_CONSUMERS * 128)
"""),
    ("""                    produce = PipelineState(PIPE_DEPTH, 1)  # stages start empty: first waits pass
""", """                    produce = PipelineState(PIPE_DEPTH, 1)  # stages start empty: first waits pass
                    publish = PipelineState(2, 1)
"""),
    ("""                            produce.advance()
                        work.next(cluster)
""", """                            produce.advance()
                        if DYNAMIC:
                            tile_empty.wait(publish.stage, publish.phase)
                            next_tile[publish.stage] = T.cuda.atomic_add(tile_counter.ptr_to([0]), 1) + plan.clusters
                            tile_full.arrive(publish.stage)
                            work._data_parallel(next_tile[publish.stage])
                            publish.advance()
                        else:
                            work.next(cluster)
                    if DYNAMIC:
                        T.cuda.thread_fence()
                        if T.cuda.atomic_add(tile_counter.ptr_to([1]), 1) == plan.clusters - 1:
                            tile_counter[0] = 0
                            tile_counter[1] = 0
"""),
    ("""            consume = PipelineState(PIPE_DEPTH, 0)
""", """            consume = PipelineState(PIPE_DEPTH, 0)
            taken = PipelineState(2, 0)
"""),
    ("""                # <<< TODO 12.15
                work.next(cluster)
""", """                # <<< TODO 12.15
                if DYNAMIC:
                    tile_full.wait(taken.stage, taken.phase)
                    work._data_parallel(next_tile[taken.stage])
                    tile_empty.arrive(taken.stage)
                    taken.advance()
                else:
                    work.next(cluster)
"""),
]

if __name__ == "__main__":
    write_variant(HERE / "dynamic", DYNAMIC)
