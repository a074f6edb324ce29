"""Count the requests Gemini and Bedrock would reject in a compacted agent loop.

An agent loop of 81 model calls is played in each wire format: the model either
calls tools (one to three in parallel, their results sent back in the next
turn) or answers and the user asks again. Before every model call the history
is compacted with the defaults (``keep_head=1``, ``keep_tail=4``) at
``max_tokens`` 600 and 2,500, and the request is checked with the testing kit's
independent validator for that provider (``ctx_compact.testing.gemini`` and
``ctx_compact.testing.bedrock``). The script prints how many of the 81 requests
the validator rejects, and why (each kind of problem counted once per request
that has it), and how many of those ``check_pairing`` flags.

The compaction is whatever ``ctx_compact`` is importable; the validators are
read from ``--kit`` (a checkout holding ``ctx_compact/testing/gemini.py``), so
an older tree can be measured against the same validators::

    python benchmarks/agent_loop_rejections.py
    git worktree add /tmp/before <commit>
    PYTHONPATH=/tmp/before python benchmarks/agent_loop_rejections.py --kit .

Standard library only; the figures are facts, never asserted.
"""

from __future__ import annotations

import argparse
import importlib
import random
import sys
import types
from collections import Counter
from pathlib import Path
from typing import Any, Callable, Dict, List, Tuple

import ctx_compact

Message = Dict[str, Any]
CALLS = 81
BUDGETS = (600, 2_500)
WORDS = [
    "the",
    "of",
    "report",
    "weather",
    "price",
    "station",
    "cache",
    "token",
    "river",
    "ledger",
    "kernel",
    "orbit",
]


def _kit(root: Path) -> Tuple[Any, Any]:
    """The kit's Gemini and Bedrock validator modules, loaded from ``root`` under a name
    of their own (so that ``ctx_compact`` may be another tree's)."""
    package = types.ModuleType("_kit")
    package.__path__ = [str(root / "ctx_compact" / "testing")]
    sys.modules["_kit"] = package
    return importlib.import_module("_kit.gemini"), importlib.import_module("_kit.bedrock")


def _text(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words))


def _gemini_step(rng: random.Random, history: List[Message], n: int) -> None:
    if rng.random() < 0.7:
        ids = rng.random() < 0.5
        calls = rng.randint(1, 3)
        parts: List[Any] = []
        answers: List[Any] = []
        for k in range(calls):
            call: Dict[str, Any] = {"name": f"tool_{k}", "args": {"q": _text(rng, 3)}}
            reply: Dict[str, Any] = {"name": f"tool_{k}", "response": {"output": _text(rng, 40)}}
            if ids:
                call["id"] = reply["id"] = f"call_{n}_{k}"
            part: Dict[str, Any] = {"functionCall": call}
            if k == 0:
                part["thoughtSignature"] = "c2lnbmF0dXJl"
            parts.append(part)
            answers.append({"functionResponse": reply})
        history.append({"role": "model", "parts": parts})
        history.append({"role": "user", "parts": answers})
    else:
        history.append({"role": "model", "parts": [{"text": _text(rng, 30)}]})
        history.append({"role": "user", "parts": [{"text": _text(rng, 12)}]})


def _bedrock_step(rng: random.Random, history: List[Message], n: int) -> None:
    if rng.random() < 0.7:
        calls = rng.randint(1, 3)
        uses: List[Any] = []
        if rng.random() < 0.3:
            uses.append({"reasoningContent": {"reasoningText": {"text": _text(rng, 10)}}})
        results: List[Any] = []
        for k in range(calls):
            use_id = f"tooluse_{n}_{k}"
            uses.append({"toolUse": {"toolUseId": use_id, "name": f"tool_{k}", "input": {}}})
            results.append(
                {
                    "toolResult": {
                        "toolUseId": use_id,
                        "content": [{"text": _text(rng, 40)}],
                        "status": "success",
                    }
                }
            )
        history.append({"role": "assistant", "content": uses})
        history.append({"role": "user", "content": results})
    else:
        history.append({"role": "assistant", "content": [{"text": _text(rng, 30)}]})
        history.append({"role": "user", "content": [{"text": _text(rng, 12)}]})


def run(
    first: Message,
    step: Callable[[random.Random, List[Message], int], None],
    validate: Callable[[Any], List[Any]],
    budget: int,
    seed: int,
) -> Tuple[int, int, int, Counter[str]]:
    """``(rejected, seen by check_pairing, fitting, reasons)`` over the loop's requests."""
    rng = random.Random(seed)
    history: List[Message] = [first]
    rejected = seen = fitting = 0
    reasons: Counter[str] = Counter()
    for n in range(CALLS):
        try:
            result = ctx_compact.compact(history, max_tokens=budget)
        except ctx_compact.InvalidMessageError as exc:
            rejected += 1
            reasons[f"InvalidMessageError: {exc.reason[:60]}"] += 1
        else:
            request = result.messages
            fitting += result.fits
            problems = validate(request)
            if problems:
                rejected += 1
                # Each kind of problem once per request that has it.
                reasons.update({p.message.split(".")[0][:70] for p in problems})
                if ctx_compact.check_pairing(request):
                    seen += 1
        step(rng, history, n)
    return rejected, seen, fitting, reasons


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    here = Path(__file__).resolve().parent.parent
    parser.add_argument("--kit", type=Path, default=here, help="checkout holding the kit")
    parser.add_argument("--seed", type=int, default=0, help="data seed (default: 0)")
    args = parser.parse_args()
    gemini, bedrock = _kit(args.kit)
    print(f"ctx_compact from {Path(ctx_compact.__file__).parent}")
    print(f"an agent loop of {CALLS} model calls, keep_head=1, keep_tail=4, seed {args.seed}")
    formats = (
        ("Gemini", {"role": "user", "parts": [{"text": "start"}]}, _gemini_step, gemini),
        ("Bedrock", {"role": "user", "content": [{"text": "start"}]}, _bedrock_step, bedrock),
    )
    for name, first, step, kit in formats:
        validate = kit.validate_contents if name == "Gemini" else kit.validate_messages
        for budget in BUDGETS:
            rejected, seen, fitting, reasons = run(first, step, validate, budget, args.seed)
            print(
                f"{name:8} max_tokens {budget:>5,}: {rejected:2} of {CALLS} requests rejected"
                f" ({seen} flagged by check_pairing), {fitting} within the budget"
            )
            for reason, count in reasons.most_common():
                print(f"{'':10}{count:3} x {reason}")


if __name__ == "__main__":
    main()
