# The last wave at the squares: tail_stamps.py (when each CTA of step 12 ends) and ncu's spread of the SMs' active
# cycles (step 12 and cuBLAS), on the lent GPU after ../shared/device/README.md's first call. $OUT/results.tgz.
source experiments/every_shape/device-setup.sh
for shape in ${SHAPES:-4096x4096x4096 8192x8192x8192 2048x2048x2048}; do
  on 0 120 stamps-$shape python3 experiments/every_shape/tail_stamps.py $shape --json $R/stamps-$shape.json
done
for shape in ${NCU_SHAPES:-4096x4096x4096}; do
  ncu --profile-from-start off --clock-control none \
    --metrics sm__cycles_active.min,sm__cycles_active.avg,sm__cycles_active.max,sm__cycles_elapsed.max,gpu__time_duration.sum,sm__pipe_tensor_op_hmma_cycles_active.max,sm__pipe_tensor_op_hmma_cycles_active.avg \
    python3 experiments/every_shape/ncu_launch.py $shape > $R/ncu-active-$shape.txt 2>&1
  echo "ncu-active-$shape rc=$?" >> $R/wall.txt
done
cat $R/gpus.txt $R/wall.txt
for f in $R/stamps-*.log; do echo "== $f"; grep -v "^plan" $f | cut -c1-600; done
for f in $R/ncu-active-*.txt; do echo "== $f"; grep -E "^  [a-z_]|sm__|gpu__" $f; done
tar czf $OUT/results.tgz -C $R .
