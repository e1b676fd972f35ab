# The grades of Hopper steps 11 and 12 (reference solutions) on the lent GPU, one after the other, as a user runs
# them (`python3 -m grader`, what `make grade STEP=N IMPL=solutions` runs); after ../shared/device/README.md's
# first call. Logs in $OUT/results.tgz: grade12.log, grade11.log, wall.txt.
source experiments/every_shape/device-setup.sh
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv > $R/gpu.csv
git rev-parse HEAD > $R/commit.txt 2>/dev/null || true
for step in ${STEPS:-12 11}; do
  on 0 ${GRADE_LIMIT:-280} grade$step python3 -m grader --step $step --impl solutions --track hopper
done
cat $R/gpu.csv $R/wall.txt
for step in ${STEPS:-12 11}; do echo "== step $step"; tail -25 $R/grade$step.log; done
tar czf $OUT/results.tgz -C $R .
