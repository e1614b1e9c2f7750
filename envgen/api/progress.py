"""How the library reports progress (see envgen.progress, which the stages use too)."""

from envgen.progress import Progress, bars, count, quiet

__all__ = ["Progress", "bars", "count", "quiet"]
