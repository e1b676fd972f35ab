# ncu at small-K shapes (SHAPES, default 1000x4104x1000,1000x1000x1000): step 12 and cuBLAS, one launch each
# (ncu_launch.py), clocks not locked: which kernel cuBLAS picks there, and where step 12's time goes. After
# ../shared/device/README.md's first call; results in $OUT/results.tgz.
source experiments/every_shape/device-setup.sh
for shape in $(echo ${SHAPES:-1000x4104x1000,1000x1000x1000} | tr , ' '); do
  ncu --profile-from-start off --clock-control none --section SpeedOfLight --section LaunchStats \
    --section WarpStateStats --section Occupancy \
    --metrics sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,sm__cycles_elapsed.max,sm__cycles_active.avg,dram__bytes_read.sum,gpu__time_duration.sum \
    python3 experiments/every_shape/ncu_launch.py $shape > $R/ncu-$shape.txt 2>&1
  echo "ncu-$shape rc=$?" >> $R/wall.txt
done
cat $R/wall.txt
for f in $R/ncu-*.txt; do echo "== $f"; grep -E "max \||own plan|^  [a-z_0-9]+.*\(|Duration|Elapsed Cycles|SM Active|hmma|dram__bytes|cycles_active|Grid Size|Block Size|Registers|Shared Memory Config|Waves" $f | head -40; done
tar czf $OUT/results.tgz -C $R .
