# A cluster of two CTAs side by side along N that multicast the A tile (step 12 at commit da707ad with
# a_multicast.diff applied: `Decomposition.along_n`), against step 12's own plans at small M; on an H100 after
# ../shared/device's setup. Results: h100-amc/ (it did not pay: README.md). To run it again:
#   mkdir -p /tmp/amc/hopper && git show da707ad:solutions/hopper/step12_stream_k.py > /tmp/amc/hopper/step12_stream_k.py
#   patch /tmp/amc/hopper/step12_stream_k.py experiments/every_shape/a_multicast.diff   (then copy /tmp/amc into the
#   tree for the device), and check_and_time.py at that commit (its dpWn plans).
set -u
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
IMPL=${IMPL:-experiments/every_shape/a_multicast}
run() {  # shapes plans name
  timeout 170 python3 experiments/every_shape/check_and_time.py --impl $IMPL --steps 12 --shapes $1 --plans $2 \
      --json $OUT/amc-$3.json >> $OUT/amc.log 2>&1 || echo "  rc=$? at $1" >> $OUT/amc.log
}
run 128x3584x3584,128x4096x4096 dp32c1,dp32n,dp48n a
run 128x4608x3584,128x6144x4096 dp48c1,dp48n,dp32n b
run 256x4608x3584,256x4096x4096 dp80,dp80n,dp64,dp64n c
run 128x28672x4096 dp224c1,dp224n d
grep -E "cublas|passed': False|rc=" $OUT/amc.log
sections="--section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section SchedulerStats"
for plan in dp32c1 dp32n; do
  echo "=== 128x3584x3584 $plan" >> $OUT/ncu.txt
  timeout 100 ncu --profile-from-start off --clock-control none $sections \
      python3 experiments/every_shape/ncu_launch.py 128x3584x3584 $plan $IMPL >> $OUT/ncu.txt 2>&1 || echo "  ncu rc=$?" >> $OUT/ncu.txt
done
grep -E "^===|^  [a-zA-Z_]|Duration|DRAM Throughput|L2 Cache Throughput|Memory Throughput|Stall|Warp Cycles Per Issued|L2 Hit" $OUT/ncu.txt | head -60
