# Decode batches (M <= 64): ncu on step 12 and cuBLAS at NCU_SHAPES (one launch each, ncu_launch.py, clocks not
# locked), then step 12's plan and PLANS from each of TREES (l2promo/make_variant.py's variants beside the
# solutions) against cuBLAS at SHAPES, one interleaved run per shape. After ../shared/device/README.md's first
# call; results in $OUT/results.tgz.
source experiments/every_shape/device-setup.sh
python3 experiments/every_shape/l2promo/make_variant.py > $R/variants.log 2>&1 || { cat $R/variants.log; exit 3; }
for shape in $(echo ${NCU_SHAPES:-} | tr , ' '); do
  ncu --profile-from-start off --clock-control none --section SpeedOfLight --section LaunchStats \
    --section MemoryWorkloadAnalysis --section Occupancy \
    --metrics dram__bytes_read.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,lts__t_sector_hit_rate.pct,gpu__time_duration.sum,sm__cycles_active.avg \
    python3 experiments/every_shape/ncu_launch.py $shape > $R/ncu-$shape.txt 2>&1
  echo "ncu-$shape rc=$?" >> $R/wall.txt
done
E=experiments/every_shape/l2promo
trees=$(echo ${TREES:-solutions,l2_256} | sed "s|[^,]*|$E/&|g; s|$E/solutions|solutions|")
on 0 ${LIMIT:-300} decode python3 experiments/every_shape/check_and_time.py --steps 12 --plans ${PLANS:-auto} \
    --plans-impl $trees --shapes ${SHAPES:?} --json $R/decode.json
cat $R/wall.txt
for f in $R/ncu-*.txt; do echo "== $f"; grep -E "own plan|^  [a-z_0-9]+.*\(|Duration|DRAM Throughput|Memory Throughput|L2 Hit|dram__|lts__t_sector_hit|Grid Size|Block Size|Waves" $f | head -40; done
grep -hE "cublas|False" $R/decode.log
tar czf $OUT/results.tgz -C $R .
