"""The ``monitor:`` section of a reward config: what the reward-hacking monitor needs to know.

Written in YAML as::

    monitor:
      gold: strict                      # the term that measures what is really wanted
      agree: [[judge, correct]]         # pairs of terms that measure the same thing
      watch: [format, operands]         # terms that pay a loophole (what `rewardkit stress` lists under watch)
      gold_divergence: {min_rise: 0.2}  # thresholds of a detector (see rewardkit.monitor.detectors)
      variance_share: false             # false turns a detector off
      corroborate: true                 # with completions, statistics alerts need the content detectors

Term names are the config's top-level terms (TRL logs one reward function per top-level term).
Errors are ``ConfigError`` located at the key path (``monitor.gold``), like the rest of the config.

The built-in detectors' names and thresholds are declared here (:data:`DETECTOR_PARAMS`; each class of
:mod:`rewardkit.monitor.detectors` takes its ``params`` from it) so that reading a config never imports the
monitor package, which reads configs itself (``Monitor.from_config``); a test keeps the two lists equal.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Collection, Mapping

from .errors import ConfigError
from .params import Param, describe, validate_params

WINDOW = Param.integer(2, "records averaged for 'now' and for 'the start'", minimum=1)
PATIENCE = Param.integer(2, "consecutive records the condition must hold before an alert", minimum=1)
#: what every detector reads (``Detector.params``); the content detectors average logged steps instead
BASE_PARAMS: dict[str, Param] = {"window": WINDOW, "patience": PATIENCE}
#: the content detectors' condition must hold at ``patience`` of the last ``within`` logged steps: an exploit
#: that comes and goes from step to step (a step holds 8 or 16 samples) is not reset by one step below the level
WITHIN = Param.integer(3, "latest records among which the condition must hold 'patience' times "
                          "(equal to patience: in a row)", minimum=1)
_CONTENT_PARAMS: dict[str, Param] = {"window": Param.integer(1, "logged steps averaged for 'now' and for 'the start'",
                                                             minimum=1),
                                     "patience": PATIENCE, "within": WITHIN}

#: every built-in detector's thresholds by its config name, in the order alerts are reported
#: (rewardkit.monitor.detectors.DETECTORS, whose classes document them)
DETECTOR_PARAMS: dict[str, dict[str, Param]] = {
    "gold_divergence": {
        **BASE_PARAMS,
        "min_rise": Param.positive(0.15, "rise of the total (reward units) that counts as rising"),
        "max_gold_gain": Param.number(0.05, "largest gain of the gold term that still counts as flat")},
    "variance_share": {
        **BASE_PARAMS,
        "share": Param.fraction(0.9, "fraction of the summed term variance that counts as most"),
        "max_gold_gain": Param.number(0.05, "largest gain of the gold term for which it counts as hacking")},
    "length_drift": {
        **BASE_PARAMS,
        "min_change": Param.positive(0.3, "relative change of the mean length that counts as drift"),
        "max_gold_gain": Param.number(0.05, "largest gain of the gold term that still counts as not moving")},
    "group_collapse": {
        **BASE_PARAMS,
        "level": Param.fraction(0.5, "fraction of zero-spread groups that counts as collapsed"),
        "min_rise": Param.fraction(0.25, "rise since the start that counts as collapsing")},
    "diversity_collapse": {
        **BASE_PARAMS,
        "level": Param.fraction(0.5, "distinct fraction at or below which a group counts as collapsed"),
        "min_drop": Param.fraction(0.25, "fall since the start that counts as collapsing")},
    "pinned_at_bound": {
        **BASE_PARAMS,
        "tolerance": Param.fraction(0.03, "distance from a bound, as a fraction of the range, that counts as at it")},
    "disagreement": {
        **BASE_PARAMS,
        "min_gap": Param.positive(0.2, "difference between the two terms' changes that counts as disagreeing")},
    "exploit_spread": {
        **_CONTENT_PARAMS,
        "level": Param.fraction(0.5, "share of a step's completions, paid and rejected by gold, that counts as spread"),
        "min_rise": Param.fraction(0.25, "rise of that share since the start that counts as spreading")},
    "watched_spread": {
        **_CONTENT_PARAMS,
        "level": Param.fraction(0.5, "share of a step's completions, rejected by gold and paid by a watched term, "
                                     "that counts as spread"),
        "min_rise": Param.fraction(0.25, "rise of that share since the start that counts as spreading")},
    "template_convergence": {
        **_CONTENT_PARAMS,
        "level": Param.fraction(0.5, "share of a step's completions in one paid, rejected template "
                                     "that counts as converged"),
        "min_rise": Param.fraction(0.25, "rise of that share since the start that counts as converging")},
}
MONITOR_KEYS = ("gold", "agree", "watch", "corroborate", *DETECTOR_PARAMS)


@dataclass(frozen=True)
class MonitorSettings:
    """Validated ``monitor:`` section: gold term, agreeing pairs, per-detector thresholds or off, and
    whether statistics alerts need the content detectors' corroboration when completions are read."""

    gold: str | None = None
    agree: tuple[tuple[str, str], ...] = ()
    #: terms known to pay a loophole (``rewardkit stress``'s ``watch``): the audit with completions watches
    #: the share of completions gold rejects that they pay, whatever the total (``watched_spread``)
    watch: tuple[str, ...] = ()
    #: detector name -> its validated params (defaults filled in), or None when turned off
    detectors: dict[str, dict[str, Any] | None] = field(default_factory=dict)
    #: the thresholds as written (to write the section back)
    written: dict[str, Any] = field(default_factory=dict)
    #: with completions, a statistics hacking alert stays hacking only once a content detector fired
    corroborate: bool = True

    def to_dict(self) -> dict[str, Any]:
        """YAML-ready mapping that :func:`parse_monitor` turns back into these settings."""
        out: dict[str, Any] = {}
        if self.gold is not None:
            out["gold"] = self.gold
        if self.agree:
            out["agree"] = [list(pair) for pair in self.agree]
        if self.watch:
            out["watch"] = list(self.watch)
        if not self.corroborate:
            out["corroborate"] = False
        out.update(self.written)
        return out


def parse_monitor(spec: Any, terms: Collection[str], *, source: str | None = None,
                  path: str = "monitor") -> MonitorSettings | None:
    """Validate a ``monitor:`` mapping against the config's top-level ``terms``; None when absent.

    Every problem is reported at once (one ``ConfigError`` listing them in ``.errors``).
    """
    if spec is None:
        return None
    if not isinstance(spec, Mapping):
        raise ConfigError(f"expected a mapping with any of: {', '.join(MONITOR_KEYS)}, got {describe(spec)}",
                          source=source, path=path)
    errors: list[ConfigError] = [ConfigError(f"unknown key; expected one of: {', '.join(MONITOR_KEYS)}",
                                             source=source, path=f"{path}.{key}")
                                 for key in spec if key not in MONITOR_KEYS]
    names = _TermNames(terms, source, errors)
    gold = None if spec.get("gold") is None else names.check(spec["gold"], f"{path}.gold")
    agree = _agree(spec.get("agree"), f"{path}.agree", names)
    watch = _watch(spec.get("watch"), f"{path}.watch", names, gold)
    corroborate = spec.get("corroborate", True)
    if not isinstance(corroborate, bool):
        names.error(f"expected true or false, got {describe(corroborate)}", f"{path}.corroborate")
    detectors, written = _thresholds(spec, path, source, errors)
    if errors:
        raise ConfigError.combine(errors)
    return MonitorSettings(gold, agree, watch, detectors, written, corroborate=corroborate)


class _TermNames:
    """Checks that a value names a term, recording a located error otherwise."""

    def __init__(self, terms: Collection[str], source: str | None, errors: list[ConfigError]) -> None:
        self.terms, self.source, self.errors = terms, source, errors
        self.listing = ", ".join(sorted(terms))

    def check(self, value: Any, where: str) -> str | None:
        if isinstance(value, str) and value in self.terms:
            return value
        self.error(f"expected the name of a term ({self.listing}), got {describe(value)}", where)
        return None

    def error(self, message: str, where: str) -> None:
        self.errors.append(ConfigError(message, source=self.source, path=where))


def _agree(pairs: Any, where: str, names: _TermNames) -> tuple[tuple[str, str], ...]:
    """``monitor.agree``: a list of pairs of different term names."""
    if pairs is None:
        return ()
    if not isinstance(pairs, list):
        names.error(f"expected a list of pairs of term names ([[a, b], ...]), got {describe(pairs)}", where)
        return ()
    agree: list[tuple[str, str]] = []
    for i, pair in enumerate(pairs):
        at = f"{where}[{i}]"
        if not isinstance(pair, list) or len(pair) != 2:
            names.error(f"expected a pair of term names [a, b], got {describe(pair)}", at)
            continue
        a, b = names.check(pair[0], f"{at}[0]"), names.check(pair[1], f"{at}[1]")
        if a is not None and a == b:
            names.error(f"expected two different terms, got {a!r} twice", at)
        elif a is not None and b is not None:
            agree.append((a, b))
    return tuple(agree)


def _watch(terms: Any, where: str, names: _TermNames, gold: str | None) -> tuple[str, ...]:
    """``monitor.watch``: a list of distinct term names, gold not among them (gold is the referee)."""
    if terms is None:
        return ()
    if not isinstance(terms, list):
        names.error(f"expected a list of term names ([a, b]), got {describe(terms)}", where)
        return ()
    watch: list[str] = []
    for i, value in enumerate(terms):
        name = names.check(value, f"{where}[{i}]")
        if name is None:
            continue
        if name == gold:
            names.error(f"expected a term other than the gold term {gold!r} (gold judges what the watched terms pay)",
                        f"{where}[{i}]")
        elif name in watch:
            names.error(f"expected each term once, got {name!r} again", f"{where}[{i}]")
        else:
            watch.append(name)
    return tuple(watch)


def check_within(params: dict[str, Any], *, path: str, source: str | None = None) -> dict[str, Any]:
    """``params`` unchanged when its ``within`` (if any) is at least its ``patience``, else a located error:
    a condition cannot hold ``patience`` times among fewer records."""
    within, patience = params.get("within"), params.get("patience")
    if within is not None and patience is not None and within < patience:
        raise ConfigError(f"expected an integer >= patience ({patience}), got {within}", source=source,
                          path=f"{path}.within")
    return params


def _thresholds(spec: Mapping, path: str, source: str | None,
                errors: list[ConfigError]) -> tuple[dict[str, dict[str, Any] | None], dict[str, Any]]:
    """Each detector's validated params (None when turned off with ``false``), and what was written."""
    detectors: dict[str, dict[str, Any] | None] = {}
    written: dict[str, Any] = {}
    for name, params in DETECTOR_PARAMS.items():
        given = spec.get(name)
        if given is False:
            detectors[name], written[name] = None, False
            continue
        if given is not None and not isinstance(given, Mapping):
            errors.append(ConfigError(f"expected a mapping of thresholds or false, got {describe(given)}",
                                      source=source, path=f"{path}.{name}"))
            continue
        try:
            detectors[name] = check_within(validate_params(params, given, path=f"{path}.{name}", source=source),
                                           path=f"{path}.{name}", source=source)
        except ConfigError as exc:
            errors.extend(exc.errors)
            continue
        if given:
            written[name] = dict(given)
    return detectors, written
