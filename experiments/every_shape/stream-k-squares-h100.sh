# Where stream-K's time goes at the large squares (issue 34: 4096^3 and 8192^3 leave 3% of the SMs idle in their
# last wave, and stream-K over that wave has cost more than it saves). On a node of two GPUs, after
# ../shared/device/README.md's first call (part a of the wheel):
#   GPU 0: step 12's own plan and the plans PLANS (default auto,sk256,sk256c1: stream-K in pairs and alone) at the
#          shapes SHAPES0 (default 4096^3 and 8192^3), correct, same bits twice, timed against cuBLAS in one
#          interleaved run per shape (check_and_time.py);
#   GPU 1: the same at the shapes SHAPES1 (if given), then one launch of step 12's own plan and of sk256 at 4096^3
#          under ncu, with the warps' stall reasons by source line.
# Everything comes back in $OUT/results.tgz. The run of 2026-11-28 (h200-stream-k-tail/):
#   PLANS=sk256,sk256c1,sk224,sk128,dp256c1 \
#   SHAPES0=8192x8192x8192,4096x4096x16384,8192x4096x14336,8192x3584x18944 \
#   SHAPES1=8192x4096x4096,8192x28672x4096,8192x6144x4096,4096x4096x4096 \
#   bash experiments/every_shape/stream-k-squares-h100.sh
source experiments/every_shape/device-setup.sh
METRICS=sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,sm__cycles_elapsed.avg.per_second
METRICS=$METRICS,sm__cycles_elapsed.max,dram__bytes_read.sum,dram__bytes_write.sum
NCU="ncu --profile-from-start off --clock-control none --section SpeedOfLight --section WarpStateStats
  --section SourceCounters --section MemoryWorkloadAnalysis --metrics $METRICS"
PLANS=${PLANS:-auto,sk256,sk256c1}
gpu0() {
  on 0 420 time python3 experiments/every_shape/check_and_time.py --steps 12 --plans $PLANS \
      --shapes ${SHAPES0:-4096x4096x4096,8192x8192x8192} --json $R/time.json
}
gpu1() {
  [ -n "${SHAPES1:-}" ] && on 1 420 time1 python3 experiments/every_shape/check_and_time.py --steps 12 \
      --plans $PLANS --shapes $SHAPES1 --json $R/time1.json
  for plan in auto sk256; do
    on 1 150 ncu-$plan $NCU python3 experiments/every_shape/ncu_launch.py 4096x4096x4096 $plan
  done
}
gpu0 & gpu1 &
wait
cat $R/wall.txt $R/gpus.txt
grep -hE "cublas|passed': False" $R/time.log $R/time1.log
for f in $R/ncu-*.log; do
  echo "== $f"
  grep -E "Duration|Elapsed Cycles|SM Frequency|hmma|dram__bytes|Memory Throughput|Stall|^ +nvjet|kernel" $f | head -30
done
tar czf $OUT/results.tgz -C $R .
