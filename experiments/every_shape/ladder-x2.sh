# The whole `make bench` on a node of two GPUs, in two calls (a call may run 600 s; the tables take about 1340
# GPU-seconds): PART=1 the squares and 128 tokens on GPU 0, 256 and 1000 tokens on GPU 1; PART=2 8192 tokens on
# GPU 0, and on GPU 1 `make grade STEP=12 IMPL=solutions` (what it runs) and step 12 beside stream-K over 128-wide
# tiles at 256x3584x18944 (the run of 2026-11-28 that made h200-sk-widths/256x3584x18944-bench-run.json, when the
# model took 112-wide ranges there). Each shape is its own interleaved
# run on its GPU. After ../shared/device/README.md's first call (part a of the wheel); everything comes back in
# $OUT/results.tgz. Merge the two calls' tables with `python -m grader.commands.bench --merge`.
source experiments/every_shape/device-setup.sh
bench() {  # gpu seconds table [tokens]
  local name=${4:+m$4}; name=${name:-$3}
  on $1 $2 $name python3 -m grader.commands.bench --table $3 ${4:+--tokens $4} --out $R/$name
}
case "${PART:?PART=1 or PART=2}" in
  1) { bench 0 330 squares; bench 0 220 models 128; } &
     { bench 1 260 models 256; bench 1 280 models 1000; } & ;;
  2) bench 0 380 models 8192 &
     { on 1 250 grade12 python3 -m grader --step 12 --impl solutions --track hopper --seed 7
       on 1 200 sk128 python3 experiments/every_shape/check_and_time.py --steps 12 --plans sk128 \
           --shapes 256x3584x18944 --json $R/sk128.json; } & ;;
esac
wait
cat $R/wall.txt $R/gpus.txt
[ -f $R/grade12.log ] && tail -6 $R/grade12.log
[ -f $R/sk128.log ] && grep -E "cublas|False" $R/sk128.log
for f in $R/*.md; do echo "== $f"; grep -A8 "^| implementation" $f; done
tar czf $OUT/results.tgz -C $R .
