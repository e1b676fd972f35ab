# The whole `make bench` on one GPU, in calls of under 10 minutes, and the grades of steps 11 and 12 (the tables'
# times on an H100 of 2026-11-28: squares 291 s, 128 tokens 154, 256 206, 1000 228, 8192 308; on the H200 of
# 2026-12-02: 318, 183, 199, 218, 247, step 12's grade 139):
#   TABLES="squares"        bash experiments/every_shape/ladder-x1.sh
#   TABLES="128 256"        bash experiments/every_shape/ladder-x1.sh
#   TABLES="1000 8192"      bash experiments/every_shape/ladder-x1.sh
#   TABLES="grade12 grade11" bash experiments/every_shape/ladder-x1.sh
# back to back, so that the machine stays warm (after ../shared/device/README.md's first call); each shape is its own
# interleaved run. A table or grade gets at most what is left of CALL_LIMIT (default 570 s) so that the tar below
# always runs. The machine keeps /tmp/results between warm calls: each call's $OUT/results.tgz holds every table
# so far; merge them here with `python -m grader.commands.bench --merge A.json B.json ... --out docs/ladder-h100`.
source experiments/every_shape/device-setup.sh
start=$(date +%s)
within() {  # the smaller of $1 seconds and what is left of the call
  local left=$(( ${CALL_LIMIT:-570} - ($(date +%s) - start) ))
  echo $(( left < $1 ? (left > 1 ? left : 1) : $1 ))
}
for table in ${TABLES:?TABLES: some of squares 128 256 1000 8192 grade12 grade11}; do
  case $table in
    squares) on 0 $(within 400) squares python3 -m grader.commands.bench --table squares --out $R/squares ;;
    grade1[12]) on 0 $(within 250) $table python3 -m grader --step ${table#grade} --impl solutions --track hopper --seed 7 ;;
    *) on 0 $(within 400) m$table python3 -m grader.commands.bench --table models --tokens $table --out $R/m$table ;;
  esac
done
cat $R/wall.txt $R/gpus.txt
for g in $R/grade1[12].log; do [ -f $g ] && tail -6 $g; done
for f in $R/*.md; do echo "== $f"; grep -A8 "^| implementation" $f; done
tar czf $OUT/results.tgz -C $R .
