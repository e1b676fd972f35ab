"""Linear layers of public LLM families that `make bench` does not time, at the token counts it times: a draw of
held-out shapes, the same for a seed. Prints them comma-separated (M x N x K: tokens x out features x in features).

python experiments/every_shape/heldout_layers.py [--count 24] [--seed 20261201]

The layers are (out, in) of each family's attention (q, k and v fused; o) and MLP (gate and up fused; down), from
the models' published configurations; Llama-3-8B and Qwen2.5-7B are the bench's and are left out.
"""

import argparse
import random

LAYERS = {
    "Mistral-Nemo-12B": ((6144, 5120), (5120, 4096), (28672, 5120), (5120, 14336)),
    "Qwen2.5-14B": ((7168, 5120), (5120, 5120), (27648, 5120), (5120, 13824)),
    "Gemma-2-9B": ((8192, 3584), (3584, 4096), (28672, 3584), (3584, 14336)),
    "Phi-3-mini": ((9216, 3072), (3072, 3072), (16384, 3072), (3072, 8192)),
    "Llama-3-70B": ((10240, 8192), (8192, 8192), (57344, 8192), (8192, 28672)),
}
TOKENS = (128, 256, 1000, 8192)


def draw(count: int, seed: int) -> list[tuple[int, int, int]]:
    shapes = [(m, n, k) for m in TOKENS for layers in LAYERS.values() for n, k in layers]
    return sorted(random.Random(seed).sample(shapes, count))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=24)
    parser.add_argument("--seed", type=int, default=20261201)
    args = parser.parse_args()
    print(",".join(f"{m}x{n}x{k}" for m, n, k in draw(args.count, args.seed)))
