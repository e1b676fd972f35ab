# Issue 36: the sample class's wall time on both GPUs of a node, then on one GPU of the same machine.
# The zips layout of `tests/sample_class.py --out-of-bounds` (10 students: the reference, a crash at import, four
# hostile archives, a kernel the static checks reject, the other track's files, step 2 not handed in, a store out of
# bounds), Hopper steps 1 and 2, seed 7. Both GPUs first: anything a first run leaves warm favours the one-GPU run,
# so the speedup below is not flattered. Usage: bash run-class-walltime.sh all|one  (the setup must have run)
set -u
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
[ -d /tmp/class/zips ] || python3 tests/sample_class.py /tmp/class --out-of-bounds >/dev/null || exit 4
case $1 in all) name=all-gpus; devices= ;; one) name=one-gpu; devices=0 ;; *) echo "all or one" >&2; exit 2 ;; esac
t0=$(date +%s.%N)
env ${devices:+CUDA_VISIBLE_DEVICES=$devices} timeout 560 python3 -m grader.commands.grade_class grade /tmp/class/zips \
    --out /tmp/$name --track hopper --steps "1 2" --seed 7 --student-timeout 300 > $OUT/$name.log 2>&1
echo "class=$name rc=$? wall_s=$(python3 -c "import time; print(round(time.time() - $t0, 1))")" | tee -a $OUT/wall.txt
cp /tmp/$name/gradebook.csv $OUT/$name-gradebook.csv; cp /tmp/$name/manifest.json $OUT/$name-manifest.json
tar czf $OUT/$name.tgz -C /tmp $name
tail -25 $OUT/$name.log
