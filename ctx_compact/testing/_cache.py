"""Prompt caching as the providers bill it: OpenAI's automatic prefixes, Anthropic's breakpoints.

A prompt is read as the units it is sent in, in order (each API's module says
which: the tools, the system prompt, each message or input item, each content
block), and a prefix of it is known by a digest chained over its units. What
a provider has cached is a set of such digests per API and model, held by one
``PromptCache`` per ``FakeProvider``; nothing expires.

- OpenAI (Chat Completions, Responses) caches every prompt it is sent. A
  request reads the longest prefix, in whole units, that it shares with an
  earlier one: reported when it is at least 1,024 tokens, rounded down to a
  multiple of 128, as OpenAI documents (``openai_cached``). Gemini's implicit
  cache is read the same way, to the token (its smallest documented minimum,
  Gemini 2.5 Flash's 1,024 tokens, for every model).
- Anthropic caches only at ``cache_control`` breakpoints: a breakpoint's prefix
  runs through the block that carries it. A request reads the longest prefix an
  earlier request wrote at one of its breakpoints, up to its own last breakpoint
  (Anthropic's look-back, modelled without its 20-block limit), and writes the
  rest of the prefix up to its last breakpoint. A prefix under 1,024 tokens is
  not cached (``breakpoint_split``). Bedrock's ``cachePoint`` blocks are such
  breakpoints, each ending the prefix at the unit before it.
"""

from __future__ import annotations

import hashlib
import json
import threading
from typing import Any, Callable, Dict, Iterable, List, Sequence, Set, Tuple

#: The fewest tokens a prefix must hold to be cached, as OpenAI and Anthropic document.
MINIMUM = 1024
#: OpenAI reports cached tokens in steps of this many.
OPENAI_STEP = 128


def unit_key(*parts: Any) -> str:
    """A unit's identity: its compact JSON, in the order its fields were sent."""
    return json.dumps(parts, separators=(",", ":"), ensure_ascii=False)


def prefixes(keys: Iterable[str]) -> List[bytes]:
    """The digest of each prefix: the first unit, the first two, ... through all of them."""
    digests: List[bytes] = []
    previous = b""
    for key in keys:
        previous = hashlib.blake2b(previous + key.encode(), digest_size=16).digest()
        digests.append(previous)
    return digests


class PromptCache:
    """The prefixes one provider has cached, per API and model. Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._written: Dict[str, Set[bytes]] = {}

    def read_and_write(
        self, scope: str, digests: Sequence[bytes], readable: int, writes: Iterable[int]
    ) -> int:
        """Find the longest cached prefix, then cache the prefixes ``writes`` names.

        Args:
            scope: The API and model the prefixes are cached for.
            digests: The digest of each prefix of the request (``prefixes``).
            readable: How many units a read may cover at most.
            writes: The lengths, in units, of the prefixes to cache.

        Returns:
            The length, in units, of the longest cached prefix within ``readable``
            (0 for none), as found before this request's writes.
        """
        with self._lock:
            written = self._written.setdefault(scope, set())
            found = next(
                (n for n in range(min(readable, len(digests)), 0, -1) if digests[n - 1] in written),
                0,
            )
            written.update(digests[n - 1] for n in writes if n > 0)
        return found

    def clear(self) -> None:
        """Forget every cached prefix."""
        with self._lock:
            self._written.clear()


def openai_cached(
    cache: PromptCache, scope: str, units: Sequence[Tuple[str, int]], step: int = OPENAI_STEP
) -> int:
    """OpenAI's ``cached_tokens`` for a prompt of ``units`` (each its key and its tokens):
    the longest prefix shared with an earlier prompt, in multiples of ``step``. Gemini's
    implicit cache follows the same rule in steps of one token.

    The whole prompt is cached for the requests after it.
    """
    digests = prefixes(key for key, _ in units)
    shared = cache.read_and_write(scope, digests, len(digests), range(1, len(digests) + 1))
    tokens = sum(count for _, count in units[:shared])
    return tokens // step * step if tokens >= MINIMUM else 0


def breakpoint_split(
    cache: PromptCache,
    scope: str,
    keys: Sequence[str],
    breakpoints: Sequence[int],
    through: Callable[[int], int],
) -> Tuple[int, int]:
    """The tokens read from and written to the cache by a prompt with breakpoints.

    Anthropic's ``(cache_read_input_tokens, cache_creation_input_tokens)``, and
    Bedrock's ``(cacheReadInputTokens, cacheWriteInputTokens)``.

    Args:
        cache: The provider's cache.
        scope: The model (and API) the prompt is sent to.
        keys: Each unit's identity, in the order sent (the breakpoints left out).
        breakpoints: The length, in units, of each breakpoint's prefix.
        through: The tokens of the prompt's first ``n`` units, as this request bills them.
    """
    if not breakpoints:
        return 0, 0
    last = max(breakpoints)
    cacheable = sorted(n for n in set(breakpoints) if through(n) >= MINIMUM)
    read_units = cache.read_and_write(scope, prefixes(keys[:last]), last, cacheable)
    read = through(read_units) if read_units else 0
    written = 0
    if cacheable and cacheable[-1] == last and read_units < last:
        written = through(last) - read
    return read, written
