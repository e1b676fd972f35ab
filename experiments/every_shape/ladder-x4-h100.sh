# The whole `make bench` on one node of 4 H100s, one table per GPU at once (each shape is its own interleaved run on
# its GPU), then on the GPUs that finish first: `make grade STEP=12 IMPL=solutions` (what it runs) and ncu on step 12
# against cuBLAS at 4096^3 and 8192^3 (ncu-squares-h100.sh). After ../shared/device/README.md's first call (part a of
# the wheel). Everything comes back in $OUT/results.tgz (a call returns at most 8 files). The tables are dealt by the
# times the 2026-11-28 run took (squares 291 s, 128 tokens 154, 256 206, 1000 228, 8192 308, grade 12 ~150).
# Its second run that day got a node of four H200s (h200-ladder-x4/, docs/ladder-h200.*): 445 s in all.
source experiments/every_shape/device-setup.sh
gpu0() {
  on 0 250 m128 python3 -m grader.commands.bench --table models --tokens 128 --out $R/m128
  on 0 250 grade12 python3 -m grader --step 12 --impl solutions --track hopper --seed 7
}
gpu1() {
  on 1 250 m256 python3 -m grader.commands.bench --table models --tokens 256 --out $R/m256
  on 1 280 m1000 python3 -m grader.commands.bench --table models --tokens 1000 --out $R/m1000
}
gpu2() {
  on 2 380 m8192 python3 -m grader.commands.bench --table models --tokens 8192 --out $R/m8192
  on 2 120 ncu4096 bash experiments/every_shape/ncu-squares-h100.sh 4096x4096x4096 $R
}
gpu3() {
  on 3 380 squares python3 -m grader.commands.bench --table squares --out $R/squares
  on 3 150 ncu8192 bash experiments/every_shape/ncu-squares-h100.sh 8192x8192x8192 $R
}
gpu0 & gpu1 & gpu2 & gpu3 &
wait
cat $R/wall.txt $R/gpus.txt
tail -6 $R/grade12.log
for f in m128 m256 m1000 m8192 squares; do echo "== $f"; grep -A8 "^| implementation" $R/$f.md 2>/dev/null || tail -3 $R/$f.log; done
tar czf $OUT/results.tgz -C $R .
