# The whole `make bench` on one GPU, in three calls of under 10 minutes (on the H100 of 2026-11-28 the tables took:
# squares 291 s, 128 tokens 154, 256 206, 1000 228, 8192 308; `make grade STEP=12` about 150):
#   TABLES="squares 128" bash experiments/every_shape/ladder-x1.sh      (about 445 s)
#   TABLES="256 1000"    bash experiments/every_shape/ladder-x1.sh      (about 434 s)
#   TABLES="8192 grade"  bash experiments/every_shape/ladder-x1.sh      (about 458 s)
# back to back, so that the machine stays warm (after ../shared/device/README.md's first call); each shape is its own
# interleaved run. Each call's tables come back in $OUT/results.tgz; merge them here with
# `python -m grader.commands.bench --merge A.json B.json ... --out docs/ladder-h100`.
source experiments/every_shape/device-setup.sh
for table in ${TABLES:?TABLES: some of squares 128 256 1000 8192 grade}; do
  case $table in
    squares) on 0 380 squares python3 -m grader.commands.bench --table squares --out $R/squares ;;
    grade) on 0 250 grade12 python3 -m grader --step 12 --impl solutions --track hopper --seed 7 ;;
    *) on 0 380 m$table python3 -m grader.commands.bench --table models --tokens $table --out $R/m$table ;;
  esac
done
cat $R/wall.txt $R/gpus.txt
[ -f $R/grade12.log ] && tail -6 $R/grade12.log
for f in $R/*.md; do echo "== $f"; grep -A8 "^| implementation" $f; done
tar czf $OUT/results.tgz -C $R .
