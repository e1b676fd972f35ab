# The Hopper known-bad variants of STEPS (default "11,12") on the lent GPU, PART (I/N) of them per call, SHARDS
# graded at once (known_bad_gpu.py); after ../shared/device/README.md's first call. Results in $OUT/results.tgz.
#   PART=1/2 SHARDS=12 SECONDS_LIMIT=550 bash experiments/every_shape/known-bad-gpu.sh   (then PART=2/2; on an H200's
#   16 cores, 2026-12-02: 550 s and 494 s); NAMES=a,b,... grades only those variants
source experiments/every_shape/device-setup.sh
python3 experiments/every_shape/known_bad_gpu.py --steps ${STEPS:-11,12} --part ${PART:-1/1} --names "${NAMES:-}" --shards ${SHARDS:-4} \
    --seconds ${SECONDS_LIMIT:-520} --out $R/known-bad > $R/known-bad.log 2>&1
cat $R/known-bad.log
tar czf $OUT/results.tgz -C $R .
