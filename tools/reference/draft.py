#!/usr/bin/python3
"""One DSpark draft cycle after a prompt, in the numpy reference (the oracle of
`cedar logits --draft-out DIR --kernels ref`).

    /usr/bin/python3 tools/reference/draft.py --model DIR --ids 0,5,7 --out-dir OUT [--anchor ID]

Runs the target over the prompt (positions 0..T-1) recording the DSpark taps, then one draft
cycle at p = T - 1 with the anchor (default: the target's argmax at the last position) and a
temperature-0 Markov loop. Writes OUT/tokens.npy (int64 [block + 1]: anchor, drafts),
OUT/logits.npy (float32 [block, vocab]: draft logits, Markov bias included) and
OUT/confidence.npy (float32 [block]: confidence logits). Errors exit 1 with `draft.py: error:`.
"""

import argparse
import os
import sys

import numpy as np

from checkpoint import CheckpointError
from dspark import DSpark
from logits import UsageError, _Parser, load_model, parse_ids


def main(argv=None):
    ap = _Parser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--model", required=True, help="checkpoint directory")
    ap.add_argument("--ids", required=True, help="comma separated prompt token ids")
    ap.add_argument("--anchor", type=int, help="the anchor token (default: target argmax)")
    ap.add_argument("--out-dir", required=True, help="directory for the three .npy files")
    a = ap.parse_args(argv)
    try:
        ids = parse_ids(a.ids, "--ids")
        model = load_model(a.model)
        V = model.args.vocab_size
        if any(i >= V for i in ids) or (a.anchor is not None and not 0 <= a.anchor < V):
            raise UsageError(f"a token id is outside the vocabulary (vocab_size {V})")
        drafter = DSpark(model)
        taps = []
        logits = model.forward(np.array(ids, dtype=np.int64), taps=taps)
        anchor = int(np.argmax(logits[-1])) if a.anchor is None else a.anchor
        tokens, dl, conf = drafter.draft(taps[0], len(ids) - 1, anchor)
        os.makedirs(a.out_dir, exist_ok=True)
        np.save(os.path.join(a.out_dir, "tokens.npy"), tokens)
        np.save(os.path.join(a.out_dir, "logits.npy"), dl.astype(np.float32))
        np.save(os.path.join(a.out_dir, "confidence.npy"), conf.astype(np.float32))
    except (UsageError, CheckpointError, OSError) as e:
        print(f"draft.py: error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
