"""What a share link lost or changed on the way in: one note per dropped, defaulted or corrected
parameter, each with the parameter, its value, why, and a "did you mean" where one is close.

:mod:`planner.share` (the plan), :mod:`planner.compare` (Compare's columns) and
:func:`planner.share.decode_size_params` (the Size page's ``size_*``) all return these, so the
app can show one restore notice that lists every part of a link it did not take as written.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import dataclass

DROPPED, DEFAULTED, CORRECTED = "dropped", "defaulted", "corrected"
CUTOFF = 0.6  # difflib's similarity a suggestion needs (its own default)


def closest(word: str, choices: Iterable[str], cutoff: float = CUTOFF) -> str | None:
    """The choice most like ``word`` (case-insensitive, difflib's ratio), or None when none is
    close: ``closest("gpuz", ["gpu", "gpus"])`` -> "gpu"; ``closest("B200-18GB", CATALOG)`` -> "B200-180GB";
    failing that, the first choice that starts with ``word`` (``"H100"`` -> ``"H100-SXM-80GB"``)."""
    if not isinstance(word, str) or not word or len(word) > 128:
        return None
    by_lower: dict[str, str] = {}
    for choice in choices:
        by_lower.setdefault(choice.lower(), choice)
    hit = difflib.get_close_matches(word.lower(), list(by_lower), n=1, cutoff=cutoff)
    if hit:
        return by_lower[hit[0]]
    prefixed = [choice for low, choice in by_lower.items() if low.startswith(word.lower())]  # "H100" -> "H100-SXM-80GB"
    return prefixed[0] if prefixed else None


@dataclass(frozen=True)
class LinkNote:
    """One parameter of a link that was not taken as written.

    ``kind``: ``dropped`` (an unknown key, ignored), ``defaulted`` (a bad value: the default is
    used instead) or ``corrected`` (a near miss replaced by ``used``). ``suggestion`` is the
    "did you mean" (a key, a GPU name) when one is close.
    """

    kind: str
    key: str
    value: str
    why: str
    used: str = ""  # what the planner uses instead ("the default 100", "B200-180GB")
    suggestion: str | None = None

    def text(self) -> str:
        value = self.value if len(self.value) <= 40 else self.value[:37] + "..."
        if self.kind == DROPPED:
            hint = f"; did you mean {self.suggestion!r}?" if self.suggestion else ""
            return f"{self.key}={value!r} {self.why}; ignored{hint}"
        head = f"{self.key} {value!r} {self.why}"
        if self.kind == CORRECTED:
            return f"{head}; did you mean {self.used}? Using it"
        hint = f" (did you mean {self.suggestion!r}?)" if self.suggestion else ""
        return f"{head}; using {self.used}{hint}" if self.used else f"{head}{hint}"


def unknown_key(key: str, value: object, known: Iterable[str], aliases: dict[str, str] | None = None) -> LinkNote:
    """A dropped note for a key the link's readers do not know, with the nearest known key
    (``aliases`` maps a long name such as a field name to its key: ``sequences`` -> ``seq``)."""
    aliases = aliases or {}
    lowered = {k.lower(): v for k, v in aliases.items()}
    suggestion = lowered.get(key.lower())
    if suggestion is None:
        hit = closest(key, [*known, *aliases])
        suggestion = aliases.get(hit, hit) if hit is not None else None
    shown = value if isinstance(value, str) else ",".join(v for v in value if isinstance(v, str)) if isinstance(value, (list, tuple)) else ""
    return LinkNote(DROPPED, key, shown, "is not a parameter this planner reads", suggestion=suggestion)


__all__ = ["CORRECTED", "DEFAULTED", "DROPPED", "LinkNote", "closest", "unknown_key"]
