"""A kernel that hangs on purpose, with a known geometry, for the deadlock locator's tests.

Handed to the grader as if it were a step (hgemm_v4(M, N, K) -> kernel(A, B, D)); it computes nothing.
Grid of 8 CTAs, one warpgroup each. Barriers: ready[0] (init 32), never[0] and never[1] (init 1).
    every CTA but CTA 2: all 32 lanes of warp 1 arrive on ready[0], then wait for its phase 0: passes;
    CTA 2: lanes 1-31 of warp 1 arrive, then all 32 wait: stuck with 1 of 32 arrivals pending;
    CTA 5: warp 3 waits on never[1] for phase 0, which nobody arrives on: stuck with 1 of 1 pending.
So exactly 64 waits give up: CTA 2 warp 1 lanes 0-31 on ready[0], CTA 5 warp 3 lanes 0-31 on never[1].
"""

from tvm.script import tirx as T

HUNG = {  # (CTA, warp) -> (barrier, phase parity waited for, pending arrivals, init count)
    (2, 1): ("ready[0]", 0, 1, 32),
    (5, 3): ("never[1]", 0, 1, 1),
}


def hgemm_v4(M, N, K):
    @T.prim_func
    def kernel(
        A: T.Buffer((M, K), "float16"),
        B: T.Buffer((N, K), "float16"),
        D: T.Buffer((M, N), "float16"),
    ):
        T.device_entry()
        bx = T.cta_id([8])
        wg_id = T.warpgroup_id([1])
        warp_id = T.warp_id_in_wg([4])
        lane_id = T.lane_id([32])

        pool = T.SMEMPool()
        ready = pool.alloc((1,), "uint64", align=8)
        never = pool.alloc((2,), "uint64", align=8)
        pool.commit()

        if warp_id == 0:
            if lane_id == 0:
                T.ptx.mbarrier.init.shared.b64(ready.ptr_to([0]), T.uint32(32))
                T.ptx.mbarrier.init.shared.b64(never.ptr_to([0]), T.uint32(1))
                T.ptx.mbarrier.init.shared.b64(never.ptr_to([1]), T.uint32(1))
        T.ptx.fence.mbarrier_init.release.cluster()
        T.cuda.cta_sync()

        if warp_id == 1:
            if bx != 2 or lane_id != 0:
                T.ptx.mbarrier.arrive.shared.b64(ready.ptr_to([0]), T.uint32(1))
            T.cuda.mbarrier_wait(ready.ptr_to([0]), 0)
        if warp_id == 3:
            if bx == 5:
                T.cuda.mbarrier_wait(never.ptr_to([1]), 0)

    return kernel
