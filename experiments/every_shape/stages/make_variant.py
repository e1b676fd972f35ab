"""Write experiments/every_shape/stages/hopper/step12_stream_k.py: step 12 whose plan may cap its pipeline's stages
(`max_stages`; check_and_time.py's plan suffix sN, e.g. dp80s6). An experiment, not a step: does a weight stream
at 256 tokens slow down with fewer stages in flight? (cuBLAS keeps 8 at 256x4608x3584, step 12 fits 7 there.)

    python experiments/every_shape/stages/make_variant.py
"""

from pathlib import Path

HERE = Path(__file__).resolve().parent
SOURCE = HERE.parents[2] / "solutions" / "hopper" / "step12_stream_k.py"

EDITS = [
    ("""    sk_units: int
""", """    sk_units: int
    max_stages: int = 0  # at most this many pipeline stages (0: as many as fit)
"""),
    ("""    PRODUCER_REGS, CONSUMER_REGS = 40, 232""", """    PIPE_DEPTH = min(PIPE_DEPTH, plan.max_stages or PIPE_DEPTH)
    PRODUCER_REGS, CONSUMER_REGS = 40, 232"""),
]


def main() -> None:
    text = SOURCE.read_text()
    for old, new in EDITS:
        if text.count(old) != 1:
            raise SystemExit(f"make_variant: the solution no longer has:\n{old}")
        text = text.replace(old, new)
    out = HERE / "hopper" / SOURCE.name
    out.parent.mkdir(exist_ok=True)
    out.write_text(text)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
