"""Every user error the planner raises, under one base: :class:`PlannerError`.

An error carries the field, the offending value and the reason, so the CLI prints one line (exit
code 2) and the app shows the message under the control that caused it. Each class says when it
is raised and what to do about it::

    PlannerError                 bad input: a field, its value and why
    ├── ConfigError              a model config that cannot become a trustworthy geometry
    ├── LimitError               a number outside its documented range (planner.limits)
    ├── EngineRefusal            the engine would not start with these settings
    ├── ProbeProtocolError       the probe's two processes do not understand each other
    └── HubError                 a Hugging Face Hub failure (one line, never a token)
        ├── InvalidModelRefError, GatedRepoError, RepoNotFoundError, RevisionNotFoundError,
        └── ConfigNotFoundError, HubTimeoutError, HubOfflineError, InvalidHubConfigError,
            RemoteCodeRequiredError

The command line's own argument errors (``planner.cli.CLIError``) are PlannerErrors too. The
modules that raise these re-export them where callers already import them
(``planner.hub.GatedRepoError``, ``planner.engines.common.EngineRefusal``,
``planner.probe.protocol.ProtocolError``).

Not user errors, and so not here: the simulator's consistency checks
(``planner.simulate.SimulationInvariantError``, the block pool's ``AllocatorError``,
``DoubleFreeError`` and ``OutOfBlocksError``) fail only when the planner itself is wrong.
"""

from __future__ import annotations

import math
import re
import threading

SHOWN_CHARS = 80  # a value in a message is cut to this many characters


def shorten(value: object, width: int = SHOWN_CHARS) -> str:
    """``repr(value)`` cut to ``width`` characters; a huge integer is shown by its digit count.

    Never raises (Python refuses ``str()`` of integers over 4,300 digits).
    """
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 200:
        digits = int(value.bit_length() * math.log10(2)) + 1
        return f"{'-' if value < 0 else ''}<an integer of about {digits:,} digits>"
    try:
        shown = repr(value)
    except Exception:  # noqa: BLE001 - a hostile object's repr must not break the message
        shown = f"<{type(value).__name__}>"
    return shown if len(shown) <= width else shown[: width - 3] + "..."


class PlannerError(ValueError):
    """Bad input: ``field`` names what was wrong, ``value`` what was given, ``reason`` why.

    Raised by every function of the library that refuses an input; the message reads
    ``field=value: reason``. What to do: change the named input as the reason says.
    ``message`` replaces that line for errors whose whole text is the reason (the Hub's).
    """

    def __init__(self, field: str, value: object, reason: str, *, message: str | None = None) -> None:
        self.field = field
        self.value = value
        self.reason = reason
        if message is None:
            name = str(field) if len(str(field)) <= SHOWN_CHARS else str(field)[: SHOWN_CHARS - 3] + "..."
            message = f"{name}={shorten(value)}: {reason}"
        super().__init__(message)


class ConfigError(PlannerError):
    """A model config that cannot be turned into a trustworthy geometry.

    Raised while a ``config.json`` is read (:mod:`planner.configio`, :mod:`planner.geometry`,
    :mod:`planner.weights`): not JSON, a count that is missing, not an integer, inconsistent with
    another (KV heads that do not divide the attention heads) or absurdly large. ``field`` is the
    config key. What to do: fix that key, or use the model's published config (a bundled preset).
    """


class LimitError(PlannerError):
    """A number outside the range the planner documents for it, or a result that is not finite.

    Raised by :func:`planner.limits.check_number` and :func:`planner.limits.ensure_finite_json`
    (the table of ranges is in :mod:`planner.limits`). What to do: check the unit (bytes or GiB,
    ms or s) and give a value inside the range the message states.
    """


class EngineRefusal(PlannerError):
    """The engine would refuse to start with these settings: ``field`` names the setting it refuses
    (``model`` for an architecture it cannot run at all), ``value`` what was given and ``reason``
    the engine's own message (or, where the planner does not model a case, why not).

    Raised by the engine models (:mod:`planner.engines`). What to do: what the engine's message
    says (more memory, a shorter ``max_model_len``, another block size or release).
    ``estimated_max_model_len``: for a length that does not fit, the engine's own estimate of the
    longest that does (0: none or not given).
    """

    def __init__(self, field: str, value: object, reason: str, estimated_max_model_len: int = 0) -> None:
        super().__init__(field, value, reason)
        self.estimated_max_model_len = estimated_max_model_len


class ProbeProtocolError(PlannerError):
    """A message between the probe's parent and child process that is not JSON, of another
    protocol version, or fails validation.

    Raised by :mod:`planner.probe.protocol` when a request or reply is decoded; the probe reports
    it as a failed run. What to do: run the parent and the child from one planner installation
    (a different version on ``PYTHONPATH`` is the usual cause).
    """

    def __init__(self, message: str) -> None:
        super().__init__("probe", None, message, message=message)


# --------------------------------------------------------------------------- the Hub

# Exact token values seen by this process, so they can be removed from any message.
_KNOWN_TOKENS: set[str] = set()
_KNOWN_TOKENS_LOCK = threading.Lock()
TOKEN_LIKE_RE = re.compile(r"hf_[A-Za-z0-9]{30,}")  # a Hugging Face token's shape


def scrub_tokens(text: str) -> str:
    """``text`` with every token this process has seen, and anything shaped like one, masked."""
    with _KNOWN_TOKENS_LOCK:
        tokens = sorted(_KNOWN_TOKENS, key=len, reverse=True)
    for token in tokens:
        text = text.replace(token, "***")
    return TOKEN_LIKE_RE.sub("hf_***", text)


def remember_token(token: str | None) -> None:
    """Note a token in use, so no later message can show it."""
    if token and len(token) >= 8:  # shorter strings are no real token and would mangle messages
        with _KNOWN_TOKENS_LOCK:
            if len(_KNOWN_TOKENS) >= 1024:
                _KNOWN_TOKENS.clear()
            _KNOWN_TOKENS.add(token)


class HubError(PlannerError):
    """A Hub failure: ``str(error)`` is one line telling the user what to do; it never holds a token.

    Raised by :mod:`planner.hub` (``fetch_model``, ``parse_model_ref``) and by
    :func:`planner.source.resolve` for a Hub model. ``field`` is ``model``. What to do: what the
    message says; the subclasses below name the usual causes.
    """

    def __init__(self, message: str) -> None:
        message = " ".join(scrub_tokens(message).split())
        self.message = message
        super().__init__("model", None, message, message=message)


class InvalidModelRefError(HubError):
    """The repo id or revision does not match the Hub's naming rules; raised before any request.

    What to do: write the model as ``ORG/NAME`` or ``ORG/NAME@REVISION`` (a branch, tag or
    40-character commit), as the model page's title shows it; a token goes in the token field.
    """


class GatedRepoError(HubError):
    """The repo is gated.

    What to do: accept the licence on the model page, then give a token of that account (the
    app's token field, Streamlit secrets or ``HF_TOKEN``).
    """


class RepoNotFoundError(HubError):
    """No such repo, or a private repo the token (if any) cannot read.

    What to do: check the spelling of ``ORG/NAME``; for a private repo give a token that can read it.
    """


class RevisionNotFoundError(HubError):
    """The branch, tag or commit does not exist in the repo.

    What to do: use ``main``, or a tag or commit from the repo's history.
    """


class ConfigNotFoundError(HubError):
    """The repo has no ``config.json`` at that revision (an adapter or GGUF-only repo, say).

    What to do: use the base model's repo, or upload its ``config.json``.
    """


class HubTimeoutError(HubError):
    """The Hub did not answer within the time limit and nothing usable was cached.

    What to do: try again later, check ``HF_ENDPOINT`` and the proxy, or use a bundled preset.
    """


class HubOfflineError(HubError):
    """Offline (``HF_HUB_OFFLINE``) or the Hub is unreachable, and the file is not in the local cache.

    What to do: fetch the model once while online, or use a bundled preset or an uploaded config.
    """


class InvalidHubConfigError(HubError):
    """``config.json`` is not JSON, over 16 MiB, not an object, or lacks the required fields.

    What to do: pick another revision, or upload a corrected config file.
    """


class RemoteCodeRequiredError(HubError):
    """The architecture is only defined by repository code, which the planner never runs.

    What to do: upload a config that states the layer and head counts, or use a bundled preset
    of the same family.
    """
