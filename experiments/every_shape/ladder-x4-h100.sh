# The whole `make bench` on one node of 4 H100s, one table per GPU at once (each shape is its own interleaved run on
# its GPU), with the timing that queues each round ahead of the GPU; GPU 0 first runs the timing's GPU tests and the
# before/after comparison (host_gap.py), GPU 2 last a grade (step 5: the grader's timing path). After
# ../shared/device/README.md's setup. Everything comes back in $OUT/results.tgz
# (a call returns at most 8 files). As run on 2026-11-28 the 128-token table, first on GPU 1 under a 200 s limit, was
# cut at its last shape (it ran again in a second call, within 154 s: h100-ladder-x4/m128.json); the tables are now
# dealt by the times that run took (squares 291 s, 256 tokens 206, 1000 228, 8192 308, host_gap 120, grade 72).
set -u
R=/tmp/results; mkdir -p $R
bash .device/b/setup.sh > /dev/null 2>&1 || { echo "setup failed"; exit 3; }
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
nvidia-smi -L > $R/gpus.txt
on() {  # gpu seconds name command...
  local gpu=$1 limit=$2 name=$3; shift 3
  local t0=$(date +%s)
  CUDA_VISIBLE_DEVICES=$gpu timeout $limit "$@" > $R/$name.log 2>&1
  echo "$name gpu=$gpu rc=$? s=$(( $(date +%s) - t0 ))" >> $R/wall.txt
}
gpu0() {
  on 0 50 timing-tests python3 -m pytest -q -p no:cacheprovider tests/test_timing_gpu.py
  on 0 200 host-gap python3 experiments/every_shape/host_gap.py 256x4608x3584 128x4608x3584 256x3584x3584
  on 0 300 m128 python3 -m grader.commands.bench --table models --tokens 128 --out $R/m128
}
gpu1() {
  on 1 250 m256 python3 -m grader.commands.bench --table models --tokens 256 --out $R/m256
  on 1 300 m1000 python3 -m grader.commands.bench --table models --tokens 1000 --out $R/m1000
}
gpu2() {
  on 2 420 m8192 python3 -m grader.commands.bench --table models --tokens 8192 --out $R/m8192
  on 2 120 grade5 python3 -m grader --step 5 --impl solutions --track hopper --seed 7
}
gpu0 & gpu1 & gpu2 &
on 3 520 squares python3 -m grader.commands.bench --table squares --out $R/squares &
wait
cat $R/wall.txt $R/gpus.txt
tail -3 $R/timing-tests.log; cat $R/host-gap.log | grep -v "^bench:"; tail -6 $R/grade5.log
for f in m128 m256 m1000 m8192 squares; do echo "== $f"; grep -A8 "^| implementation" $R/$f.md 2>/dev/null || tail -3 $R/$f.log; done
tar czf $OUT/results.tgz -C $R .
