# The last wave at the squares, on the lent GPU after ../shared/device/README.md's first call ($OUT/results.tgz):
# tail_stamps.py (when each CTA of step 12 ends) for step 12 and its dynamic-scheduler variant
# (dynamic/make_variant.py), ncu's spread of the SMs' active cycles (step 12 and cuBLAS), and the variant timed
# beside step 12 and cuBLAS (check_and_time.py: checked, run twice for the same bits, one interleaved run per shape).
source experiments/every_shape/device-setup.sh
python3 experiments/every_shape/dynamic/make_variant.py > $R/make-variant.log 2>&1
DYN=experiments/every_shape/dynamic/dynamic
on 0 ${TIME_LIMIT:-280} time python3 experiments/every_shape/check_and_time.py --steps 12 --plans auto --plans-impl $DYN \
  --shapes ${SHAPES:-4096x4096x4096,8192x8192x8192,2048x2048x2048,8192x4096x1024,4096x4096x16384,8192x14336x4096,1000x14336x4096} \
  --json $R/time.json
for shape in ${STAMP_SHAPES:-4096x4096x4096}; do
  on 0 60 stamps-$shape python3 experiments/every_shape/tail_stamps.py $shape --json $R/stamps-$shape.json
  on 0 60 stamps-dyn-$shape python3 experiments/every_shape/tail_stamps.py $shape --impl $DYN --json $R/stamps-dyn-$shape.json
done
for shape in ${NCU_SHAPES:-4096x4096x4096}; do
  timeout 80 ncu --profile-from-start off --clock-control none \
    --metrics sm__cycles_active.min,sm__cycles_active.avg,sm__cycles_active.max,sm__cycles_elapsed.max,gpu__time_duration.sum \
    python3 experiments/every_shape/ncu_launch.py $shape > $R/ncu-active-$shape.txt 2>&1
  echo "ncu-active-$shape rc=$?" >> $R/wall.txt
done
cat $R/gpus.txt $R/wall.txt
for f in $R/stamps-*.log; do echo "== $f"; grep -v "^plan" $f | cut -c1-700; done
grep -h "cublas\|passed': False" $R/time.log
for f in $R/ncu-active-*.txt; do echo "== $f"; grep -E "^  [a-z_]|sm__|gpu__" $f; done
tar czf $OUT/results.tgz -C $R .
