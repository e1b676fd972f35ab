# Where stream-K's time goes at the large squares (issue 34: 4096^3 and 8192^3 leave 3% of the SMs idle in their
# last wave, and stream-K over that wave has cost more than it saves). On a node of two GPUs, after
# ../shared/device/README.md's first call (part a of the wheel):
#   GPU 0: step 12's own plan, stream-K in pairs (sk256) and alone (sk256c1), correct, same bits twice, timed
#          against cuBLAS in one interleaved run per shape (check_and_time.py);
#   GPU 1: one launch of each at 4096^3 under ncu, with the warps' stall reasons by source line.
# Everything comes back in $OUT/results.tgz.
set -u
R=/tmp/results; mkdir -p $R
bash .device/b/install.sh > $R/install.log 2>&1 || { cat $R/install.log; exit 3; }
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
nvidia-smi -L > $R/gpus.txt
on() {  # gpu seconds name command...
  local gpu=$1 limit=$2 name=$3; shift 3
  local t0=$(date +%s)
  CUDA_VISIBLE_DEVICES=$gpu timeout $limit "$@" > $R/$name.log 2>&1
  echo "$name gpu=$gpu rc=$? s=$(( $(date +%s) - t0 ))" >> $R/wall.txt
}
NCU="ncu --profile-from-start off --clock-control none --section SpeedOfLight --section WarpStateStats
  --section SourceCounters --section MemoryWorkloadAnalysis
  --metrics sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,sm__cycles_elapsed.avg.per_second,sm__cycles_elapsed.max,dram__bytes_read.sum,dram__bytes_write.sum"
PLANS=${PLANS:-auto,sk256,sk256c1}
gpu0() {
  on 0 420 time python3 experiments/every_shape/check_and_time.py --steps 12 --plans $PLANS \
      --shapes ${SHAPES0:-4096x4096x4096,8192x8192x8192} --json $R/time.json
}
gpu1() {
  [ -n "${SHAPES1:-}" ] && on 1 420 time1 python3 experiments/every_shape/check_and_time.py --steps 12 \
      --plans $PLANS --shapes $SHAPES1 --json $R/time1.json
  for plan in auto sk256; do on 1 150 ncu-$plan $NCU python3 experiments/every_shape/ncu_launch.py 4096x4096x4096 $plan; done
}
gpu0 & gpu1 &
wait
cat $R/wall.txt $R/gpus.txt
grep -hE "cublas|passed': False" $R/time.log $R/time1.log
for f in $R/ncu-*.log; do echo "== $f"; grep -E "Duration|Elapsed Cycles|SM Frequency|hmma|dram__bytes|Memory Throughput|Stall|^ +nvjet|hgemm|kernel" $f | head -30; done
tar czf $OUT/results.tgz -C $R .
