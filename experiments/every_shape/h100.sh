# On an H100 (after ../shared/device/README.md's setup): steps 11 and 12 graded at every correctness shape, then
# step 12 against cuBLAS under ncu at the small-M shapes where it trails most (experiments/every_shape/README.md).
set -u
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/gpu.txt
for step in 11 12; do
  timeout 240 python3 -m grader --step $step --impl solutions --track hopper --seed 7 --json $OUT/grade-$step.json \
      > $OUT/grade-$step.log 2>&1
  echo "grade step $step rc=$?"; tail -4 $OUT/grade-$step.log
done
sections="--section SpeedOfLight --section MemoryWorkloadAnalysis --section LaunchStats --section Occupancy"
for run in 128x3584x3584 256x4608x3584 256x4096x4096; do
  IFS=: read -r shape plan <<< "$run"
  echo "=== $shape ${plan:-own}" >> $OUT/ncu.txt
  timeout 150 ncu --profile-from-start off --clock-control none $sections \
      python3 experiments/every_shape/ncu_launch.py $shape $plan >> $OUT/ncu.txt 2>&1 || echo "  ncu rc=$?" >> $OUT/ncu.txt
done
grep -E "^===|^  [a-zA-Z_]|Duration|Throughput|Grid Size|Cluster|Registers|Achieved Occ|Shared Memory Config|L2 Hit|Mem Busy|Max Bandwidth" $OUT/ncu.txt | head -150
