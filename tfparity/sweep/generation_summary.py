"""What the generate check adds up to over a corpus (numpy only), from result lines alone
as the rest of the summary (:func:`~tfparity.sweep.summary.summarise`): counts and
order-free figures of integers, so merged shards give exactly the unsharded figures.

Token agreement counts, per item, the tokens agreed before its first divergent step (all
N where none): the free-running tokens, each side through its own KV cache. Items whose
tokens part are counted by why (a near-tie flip, TF's cached decoding alone, a defect),
near-ties apart from defects: a near-tie is rounding, not a fault of the port.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from .generate import VERDICTS


@dataclass
class GenerationTally:
    """The generate check's figures, item by item."""

    new_tokens: set[int] = field(default_factory=set)
    items: int = 0
    tokens: int = 0
    agreed: int = 0
    all_agreed: int = 0
    first_steps: list[int] = field(default_factory=list)
    verdicts: Counter = field(default_factory=Counter)
    cache_inconsistent: int = 0
    logits_off: int = 0

    def add(self, result: dict) -> None:
        """One item's generate result (a line's ``checks.generate``); an item where the
        check did not apply has no ``generation`` and is not counted here."""
        g = result.get("generation")
        if not g:
            return
        self.items += 1
        self.new_tokens.add(int(g["new_tokens"]))
        self.tokens += int(g["new_tokens"])
        self.agreed += int(g["tokens_agreed"])
        first = g.get("first_divergent_step")
        if first is None:
            self.all_agreed += 1
        else:
            self.first_steps.append(int(first["step"]))
        self.verdicts[g["verdict"]] += 1
        self.cache_inconsistent += not g["cache_ok"]
        self.logits_off += bool(g["referee_failures"])

    def to_dict(self) -> dict:
        steps = np.asarray(self.first_steps)
        return {
            "new_tokens": sorted(self.new_tokens)[0] if len(self.new_tokens) == 1 else None,
            "items": self.items,
            "tokens": self.tokens,
            "tokens_agreed": self.agreed,
            "token_agreement": self.agreed / self.tokens if self.tokens else None,
            "items_all_agreed": self.all_agreed,
            "items_diverged": len(self.first_steps),
            "first_divergent_step": {
                "min": int(steps.min()) if steps.size else None,
                "median": float(np.median(steps)) if steps.size else None,
                "max": int(steps.max()) if steps.size else None,
                # step -> items whose tokens first part there, in step order
                "histogram": {str(k): n for k, n in sorted(Counter(self.first_steps).items())},
            },
            "verdicts": {v: self.verdicts.get(v, 0) for v in VERDICTS},
            "items_cache_inconsistent": self.cache_inconsistent,
            # teacher-forced logits beyond the float64 referee at some step, flip or not
            "items_logits_off": self.logits_off,
        }
