# Step 12's one-CTA clusters as a plain launch (plain_launch/make_variant.py) against its own plans, steps 8 and 10
# and cuBLAS, one interleaved run per shape (check_and_time.py). On an H100, after ../shared/device/README.md's setup;
# results under $OUT.
set -u
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
python3 experiments/every_shape/plain_launch/make_variant.py
V=experiments/every_shape/plain_launch
python3 experiments/every_shape/check_and_time.py --steps 8,10,12 --plans-impl $V --plans dp256c1 \
    --shapes 2048x2048x2048,4096x4096x4096,8192x4096x1024 --json $OUT/squares.json 2>&1 | tee $OUT/squares.log
python3 experiments/every_shape/check_and_time.py --steps 12 --plans-impl $V --plans auto,dp256c1 \
    --shapes 128x28672x4096,128x37888x3584,1000x4096x4096 --json $OUT/models.json 2>&1 | tee $OUT/models.log
grep cublas $OUT/*.log
