# Split-K beside stream-K where the tiles are at most half the clusters (heldout.sh, h200-heldout/: at 256x3584x14336
# cuBLAS runs split-K x2). With FORCED: step 12's own plan and the FORCED plans (check_and_time.py: skWkS is split-K,
# S ranges a tile) at SHAPES, then ncu (stall reasons, memory) on step 12's plan and cuBLAS at NCU_SHAPE. Without:
# step 12 beside the tree before split-K (split_k/before, not committed: mkdir -p split_k/before/hopper, then
# `git show a9b7111:solutions/hopper/step12_stream_k.py` into it), each its own plan, at SHAPES, one interleaved run
# per shape, twice; with CHECK=1 first check_step12 (device-setup.sh: random shapes and plans, split-K among them,
# and step 12's grade). After ../shared/device/README.md's first call; everything comes back in $OUT/results.tgz.
source experiments/every_shape/device-setup.sh
if [ -n "${FORCED:-}" ]; then
  on 0 ${LIMIT:-240} forced python3 experiments/every_shape/check_and_time.py --steps 12 --shapes ${SHAPES:?} \
      --plans $FORCED --json $R/forced.json
  ncu --profile-from-start off --clock-control none --section SpeedOfLight --section WarpStateStats \
      --section SchedulerStats --section MemoryWorkloadAnalysis --section LaunchStats \
      python3 experiments/every_shape/ncu_launch.py ${NCU_SHAPE:?} > $R/ncu-$NCU_SHAPE.txt 2>&1
  grep -E "^  [a-z_0-9]+.*\(|Duration|Throughput|Stall|Warp Cycles|Issued|Eligible|Active Warps|Hit Rate|SM Frequency" \
      $R/ncu-$NCU_SHAPE.txt | head -70
else
  if [ -n "${CHECK:-}" ]; then check_step12; fi
  for run in 1 2; do
    on 0 ${LIMIT:-300} run$run python3 experiments/every_shape/check_and_time.py --steps 12 --shapes ${SHAPES:?} \
        --plans auto --plans-impl experiments/every_shape/split_k/before,solutions --json $R/run$run.json
  done
fi
cat $R/wall.txt
check_summary
grep -hE "cublas|False|rror" $R/forced.log $R/run*.log 2>/dev/null
tar czf $OUT/results.tgz -C $R .
