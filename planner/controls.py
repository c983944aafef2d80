"""Every plan control declared once: a :class:`Control` per :class:`~planner.plan.PlanInputs`
field, its type, bounds (the pydantic ``Field``'s ``ge`` / ``gt`` / ``le``), choices (the
``Literal``) and default read from the field, its label, unit and help from
:mod:`planner.labels`.

The surfaces are rendered from these declarations, never copied: the plan flags of the CLI
(``plan``, ``simulate``, ``report`` and the subset ``size`` takes; :mod:`planner.cli`), the Plan
page's widgets (``pages/ui/inputs.py``) and the share-link keys (:mod:`planner.share`). A new
input therefore takes one place, plus its words:

1. the field on :class:`~planner.plan.PlanInputs`, with its bounds or its ``Literal`` choices;
2. its label, unit and description in :data:`planner.labels.INPUTS` (and, optionally, the
   longer help the app shows in :data:`planner.labels.DETAILS`).

It is then a CLI flag ``--the-field-name``, a widget under "More inputs" on the Plan page and a
share-link key of its own name. Optional, for the look: a short link key in
``planner.share.SHORT_KEYS``, a place in one of the page's groups (``pages/ui/inputs.py``).
"""

from __future__ import annotations

import types
import typing
from dataclasses import dataclass

from planner.capacity import BLOCK_SIZES
from planner.hardware import CATALOG
from planner.labels import DETAILS, INPUTS, label
from planner.plan import PlanInputs
from planner.units import fmt_limit

# A field whose flag is not its name, and why.
FLAG_NAMES = {
    # `simulate` has its own --max-batched-tokens (the simulated engine's step budget)
    "max_batched_tokens": "--batch-tokens",
}
# Values an open field usually takes (a choice list the app offers; the field accepts more).
SUGGESTIONS: dict[str, tuple] = {
    "gpu": tuple(CATALOG),  # a catalog name, or a custom device (device_gib)
    "block_tokens": BLOCK_SIZES,  # the block sizes engines use
}


@dataclass(frozen=True)
class Control:
    """One plan input as every surface shows it."""

    name: str  # the PlanInputs field
    kind: str  # int | float | bool | choice | text
    nullable: bool  # None allowed (an empty control)
    default: object
    choices: tuple[str, ...] | None  # a Literal's values
    ge: float | None
    gt: float | None
    le: float | None
    label: str  # "Observed prefill (ms)"
    unit: str
    description: str  # one line, the CLI's help
    detail: str | None  # the app's longer help (planner.labels.DETAILS), if it has one
    flag: str  # "--prefill-ms"
    suggestions: tuple | None

    @property
    def lo(self) -> float | None:
        """The lower bound (inclusive with ``ge``, exclusive with ``gt``)."""
        return self.ge if self.ge is not None else self.gt

    @property
    def hi(self) -> float | None:
        return self.le

    @property
    def dest(self) -> str:
        """The flag's argparse attribute."""
        return self.flag[2:].replace("-", "_")

    @property
    def numeric(self) -> bool:
        return self.kind in ("int", "float")

    def in_range(self, value: float) -> bool:
        lo_ok = value >= self.ge if self.ge is not None else value > self.gt if self.gt is not None else True
        return lo_ok and (self.le is None or value <= self.le)

    def range_text(self) -> str:
        """">= 0 and <= 4,096"."""
        lo = f">= {fmt_limit(self.ge)}" if self.ge is not None else f"> {fmt_limit(self.gt)}" if self.gt is not None else ""
        hi = f"<= {fmt_limit(self.le)}" if self.le is not None else ""
        return " and ".join(x for x in (lo, hi) if x)

    def default_text(self) -> str:
        d = self.default
        if d is None:
            return "none"
        if isinstance(d, bool):
            return "on" if d else "off"
        return f"{d:,}" if isinstance(d, int) else str(d)

    def cli_help(self) -> str:
        """The flag's help: what it is, its unit, its default and its range (``%`` escaped for argparse)."""
        name, unit, what = INPUTS.get(self.name, (self.name, self.unit, self.description))
        text = f"{name}: {what}" + (f"; in {unit}" if unit and unit not in ("per replica",) else "") + f" (default: {self.default_text()}"
        text += f"; {self.range_text()})" if self.numeric and self.range_text() else ")"
        if self.name in SUGGESTIONS and self.kind == "text":
            text += "; known: " + ", ".join(str(s) for s in self.suggestions or ())
        return text.replace("%", "%%")


def _annotation(annotation: object) -> tuple[str, tuple[str, ...] | None, bool]:
    """(kind, Literal choices or None, nullable) of a field's annotation."""
    nullable = False
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        args = typing.get_args(annotation)
        rest = [a for a in args if a is not type(None)]
        nullable = len(rest) < len(args)
        annotation = rest[0]
    if typing.get_origin(annotation) is typing.Literal:
        return "choice", tuple(typing.get_args(annotation)), nullable
    kind = {int: "int", float: "float", bool: "bool", str: "text"}.get(annotation)  # type: ignore[call-overload]
    if kind is None:
        raise TypeError(f"PlanInputs field of type {annotation!r}: a control needs int, float, bool, str or a Literal")
    return kind, None, nullable


def _bound(field, attr: str) -> float | None:
    for meta in field.metadata:
        value = getattr(meta, attr, None)
        if value is not None:
            return value
    return None


def declare(model: type = PlanInputs) -> dict[str, Control]:
    """A :class:`Control` for every field of ``model`` (PlanInputs, or an extension of it), in field order."""
    out = {}
    for name, field in model.model_fields.items():
        kind, choices, nullable = _annotation(field.annotation)
        title, unit, description = INPUTS.get(name, (name, "", name.replace("_", " ")))
        out[name] = Control(
            name=name, kind=kind, nullable=nullable, default=field.default, choices=choices,
            ge=_bound(field, "ge"), gt=_bound(field, "gt"), le=_bound(field, "le"),
            label=label(name), unit=unit, description=description, detail=DETAILS.get(name),
            flag=FLAG_NAMES.get(name, "--" + name.replace("_", "-")), suggestions=SUGGESTIONS.get(name),
        )  # fmt: skip
    return out


CONTROLS: dict[str, Control] = declare()
