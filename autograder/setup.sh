#!/usr/bin/env bash
# Gradescope runs this once, as root, in /autograder/source of a fresh Ubuntu 24.04 image (22.04's
# Python 3.10 is too old for the pinned numpy and matplotlib). It installs the tools the grader needs,
# then the course's own `make setup` builds course/.venv from the pinned requirements.txt
# (TORCH_INDEX, WHEELS etc. in the environment reach make as README "Environment" describes).
set -euo pipefail
cd "$(dirname "$0")"

apt-get update
apt-get install -y --no-install-recommends ca-certificates wget make g++ python3 python3-venv python3-pip
python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))' || {
    echo "setup.sh: $(python3 --version) is too old: the pinned packages need Python 3.11 or newer (Ubuntu 24.04)" >&2
    exit 1
}

# Every kernel is built with nvcc and ptxas, with or without a GPU (the grade without one is the build
# and the static checks): CUDA 13.0 from NVIDIA's repository unless a toolkit is already there.
if ! command -v nvcc >/dev/null && [ ! -x /usr/local/cuda/bin/nvcc ]; then
    . /etc/os-release
    wget -q "https://developer.download.nvidia.com/compute/cuda/repos/ubuntu${VERSION_ID//./}/x86_64/cuda-keyring_1.1-1_all.deb"
    dpkg -i cuda-keyring_1.1-1_all.deb
    rm cuda-keyring_1.1-1_all.deb
    apt-get update
    # nvcc + ptxas, and the headers the generated CUDA includes (cuda_fp16.h, cuda.h, cuda/barrier)
    apt-get install -y --no-install-recommends cuda-nvcc-13-0 cuda-cudart-dev-13-0 cuda-driver-dev-13-0 cuda-cccl-13-0
    # the grader looks for the tools in /usr/local/cuda (or CUDA_HOME), not in the versioned folder
    [ -e /usr/local/cuda ] || ln -s /usr/local/cuda-13.0 /usr/local/cuda
fi

make -C course setup
