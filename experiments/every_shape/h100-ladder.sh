# What the H100 afternoon of 2026-11-27 left unrun (device time spent), for the next H100 lease, after the setup of
# ../shared/device/README.md: the squares ladder of steps 3-12 (docs/ladder-h100.*), then the model table at 1000
# and 8192 tokens (128 and 256 ran: experiments/every_shape/h100/). Each is one call of under 10 minutes:
#   bash experiments/every_shape/h100-ladder.sh squares   |   bash experiments/every_shape/h100-ladder.sh models
set -u
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
case ${1:-} in
  squares) python3 -m grader.commands.bench --table squares --out $OUT/ladder-h100 > $OUT/bench.log 2>&1 ;;
  models) python3 -m grader.commands.bench --table models --tokens 1000,8192 --out $OUT/models-h100-1000-8192 \
              > $OUT/bench.log 2>&1 ;;
  *) echo "squares or models" >&2; exit 2 ;;
esac
echo "rc=$?"; tail -20 $OUT/bench.log
