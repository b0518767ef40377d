"""How many items the paired bootstrap needs before its interval means anything: the
evidence for ``MIN_ITEMS`` in tfparity/compare/bootstrap.py (docs/quantised.md, "How
many sequences").

    python scripts/bootstrap_coverage.py [--trials 400] [--resamples 1000]

For n items (sequences) drawn from a known population, how often the 95% percentile
interval of :func:`tfparity.compare.bootstrap.bootstrap_verdict` holds the population's
value (its coverage; 0.95 is what it claims). Two populations, each per item:
``kl_mean``, each sequence's KL mean log-normal (sigma 1: a few sequences carry most of
it, as quantisation KL does) over 12 positions of their own noise; ``same_top1``, 24
positions, each sequence's flip rate itself drawn from a beta around 3% (the items of
one run differ, as texts do). Numpy only; seeded.
"""

from __future__ import annotations

import argparse

import numpy as np

from tfparity.compare.bootstrap import Limit, bootstrap_verdict
from tfparity.compare.distribution import PositionMetrics

POSITIONS = 12


def _metrics(kl: np.ndarray, same: np.ndarray, item: np.ndarray) -> PositionMetrics:
    zeros = np.zeros_like(kl)
    return PositionMetrics(kl=kl, same_top=same, dp=zeros, item=item, dp_at="target")


def _kl_items(rng, n, sigma):
    means = rng.lognormal(mean=-7, sigma=sigma, size=n)
    kl = rng.exponential(1.0, size=(n, POSITIONS)) * means[:, None]
    return kl.ravel(), np.repeat(np.arange(n), POSITIONS)


def _top1_items(rng, n, spread, positions=24):
    rates = rng.beta(0.03 * spread, 0.97 * spread, size=n)  # mean 0.03
    same = rng.random((n, positions)) >= rates[:, None]
    return same.ravel(), np.repeat(np.arange(n), positions)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=400)
    parser.add_argument("--resamples", type=int, default=1000)
    parser.add_argument("--sizes", default="1,2,3,4,5,6,8,10,12,16,24,32")
    parser.add_argument("--sigma", type=float, default=1.0, help="KL items' log-normal sigma")
    parser.add_argument(
        "--spread", type=float, default=20.0, help="flip rates' beta a+b (smaller: wider)"
    )
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    true_kl = np.exp(-7 + args.sigma**2 / 2)  # the log-normal's mean (the exponential's is 1)
    true_top1 = 1 - 0.03
    print(
        f"{'items':>5} {'kl_mean coverage':>16} {'same_top1 coverage':>18} {'zero-width share':>16}"
    )
    for n in (int(s) for s in args.sizes.split(",")):
        hits = {"kl_mean": 0, "same_top1": 0}
        zero = 0
        for _ in range(args.trials):
            kl, item = _kl_items(rng, n, args.sigma)
            m = _metrics(kl, np.ones_like(kl, bool), item)
            t = bootstrap_verdict(
                m,
                [Limit("kl_mean", "<=", 1.0)],
                resamples=args.resamples,
                seed=int(rng.integers(1 << 30)),
                minimum=1,
            ).terms[0]
            hits["kl_mean"] += t.low <= true_kl <= t.high
            same, item = _top1_items(rng, n, args.spread)
            m = _metrics(np.zeros(same.shape), same, item)
            t = bootstrap_verdict(
                m,
                [Limit("same_top1", ">=", 0.0)],
                resamples=args.resamples,
                seed=int(rng.integers(1 << 30)),
                minimum=1,
            ).terms[0]
            hits["same_top1"] += t.low <= true_top1 <= t.high
            zero += t.low == t.high
        print(
            f"{n:>5} {hits['kl_mean'] / args.trials:>16.3f} "
            f"{hits['same_top1'] / args.trials:>18.3f} {zero / args.trials:>16.3f}",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
