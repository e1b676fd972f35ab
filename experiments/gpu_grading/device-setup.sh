# On the GPU machine, after call 1: tvm + copydetect into /tmp/site, bubblewrap into /
bash .device/b/install.sh || exit 3
[ -d /tmp/site/copydetect ] || python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .device/b/whl/*.whl
command -v bwrap >/dev/null || dpkg -x .device/b/deb/bubblewrap_*.deb /
