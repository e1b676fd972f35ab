# ncu at a shape (default 4096x4096x4096): step 12, and its writeback variants stsm and bound
# (epilogue/make_variant.py), one launch each beside cuBLAS's (ncu_launch.py), clocks not locked: do the variants
# differ in cycles or in clock? After ../shared/device/README.md's first call; results in $OUT/results.tgz.
source experiments/every_shape/device-setup.sh
python3 experiments/every_shape/epilogue/make_variant.py > $R/variants.log 2>&1 || { cat $R/variants.log; exit 3; }
SHAPE=${SHAPE:-4096x4096x4096}
profile() {  # gpu name impl
  CUDA_VISIBLE_DEVICES=$1 ncu --profile-from-start off --clock-control none --section SpeedOfLight \
    --section WarpStateStats --section MemoryWorkloadAnalysis \
    --metrics sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,sm__cycles_elapsed.avg.per_second,sm__cycles_elapsed.max,dram__bytes_read.sum,dram__bytes_write.sum,gpu__time_duration.sum \
    python3 experiments/every_shape/ncu_launch.py $SHAPE auto $3 > $R/ncu-$2.txt 2>&1
  echo "ncu-$2 rc=$?" >> $R/wall.txt
}
{ profile 0 step12 solutions; profile 0 bound experiments/every_shape/epilogue/bound; } &
profile 1 stsm experiments/every_shape/epilogue/stsm &
wait
cat $R/wall.txt
for f in $R/ncu-*.txt; do echo "== $f"; grep -E "kernel_kernel|nvjet|sm90|gemm|Duration|SM Frequency|Elapsed Cycles|hmma_cycles|cycles_elapsed|dram__bytes|gpu__time|Compute \(SM\)|Memory Throughput" $f | head -40; done
tar czf $OUT/results.tgz -C $R .
