# Issue 35 on a 2-GPU node: one-GPU visibility; make grade STEP=all IMPL=solutions with bwrap (GPU 0) and without (GPU 1), same run
set -u
bash experiments/gpu_grading/device-setup.sh || exit 3
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
nvidia-smi -L | tee $OUT/gpus.txt
python3 -c "from grader.core import sandbox; print(sandbox.confinement())" | tee -a $OUT/gpus.txt
python3 -m pytest -q -s -p no:cacheprovider tests/test_sandbox.py -k only_its_own 2>&1 | tail -5 | tee $OUT/visibility.txt
grade() {  # mode gpu
  local t0=$(date +%s.%N)
  CUDA_VISIBLE_DEVICES=$2 GRADER_SANDBOX=$1 timeout 540 python3 -m grader --step all --impl solutions --track hopper --seed 7 --json $OUT/grade-$1.json > $OUT/grade-$1.log 2>&1
  local rc=$?
  echo "mode=$1 gpu=$2 rc=$rc wall_s=$(python3 -c "import time; print(round(time.time() - $t0, 1))")" >> $OUT/wall.txt
}
grade bwrap 0 & grade none 1 & wait
cat $OUT/wall.txt
tail -25 $OUT/grade-bwrap.log; tail -8 $OUT/grade-none.log
