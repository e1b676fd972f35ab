# Issue 36 on a 2-GPU node: the sample class (zips layout, 3 more copies of the reference) graded on GPU 0 alone, then on both GPUs
set -u
bash experiments/gpu_grading/device-setup.sh || exit 3
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
python3 tests/sample_class.py /tmp/class --out-of-bounds >/dev/null || exit 4
for s in ann bea cal; do cp /tmp/class/zips/gus.zip /tmp/class/zips/$s.zip; done
ls /tmp/class/zips
klass() {  # name limit [CUDA_VISIBLE_DEVICES]
  local t0=$(date +%s.%N)
  env ${3:+CUDA_VISIBLE_DEVICES=$3} timeout $2 python3 -m grader.commands.grade_class grade /tmp/class/zips --out /tmp/$1 \
      --track hopper --steps "1 2" --seed 7 --student-timeout 240 > $OUT/$1.log 2>&1
  echo "class=$1 rc=$? wall_s=$(python3 -c "import time; print(round(time.time() - $t0, 1))")" | tee -a $OUT/wall.txt
  tar czf $OUT/$1.tgz -C /tmp $1
}
klass one-gpu 380 0
klass all-gpus 200
tail -30 $OUT/all-gpus.log
