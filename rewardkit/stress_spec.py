"""The config's ``stress:`` section: what ``rewardkit stress`` checks (docs/stress.md).

```yaml
stress:
  gold: strict          # the term that says right or wrong (default: monitor.gold)
  margin: 0.5           # a wrong probe within this much of the control's total is a loophole
  budget_s: 20          # the whole run's bound in seconds (the command's --budget-s wins)
  families: {padded: false}   # probe families on (true, the default) or off
  inversions: warn      # a wrong answer paid above the bare right answer: warn (default), fail or off
```

Validated with the rest of the config: every error names its key path. The family names are
listed here (not imported from :mod:`rewardkit.stress`) so that reading a config never
imports the stress machinery; a test keeps the two lists equal.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Collection, Mapping

from .errors import ConfigError
from .params import describe

#: the probe families of ``rewardkit stress``, in the order they run (rewardkit.stress.families)
FAMILY_NAMES = ("reasoning_changed", "answer_changed", "several_answers", "bare_answer", "prompt_echo", "empty",
                "truncated", "padded", "required_words", "judge_phrases", "lookalike", "search")
STRESS_KEYS = ("gold", "margin", "budget_s", "families", "inversions")
#: what ``rewardkit stress`` does with a form-over-substance inversion (rewardkit.stress.runner)
INVERSION_MODES = ("warn", "fail", "off")
DEFAULT_BUDGET_S = 20.0
MAX_BUDGET_S = 3600.0


@dataclass(frozen=True)
class StressSettings:
    """Validated ``stress:`` section; ``gold`` None means "use monitor.gold, if any"."""

    gold: str | None = None
    margin: float = 0.0
    budget_s: float = DEFAULT_BUDGET_S
    #: family name -> on; every family is listed
    families: dict[str, bool] = field(default_factory=lambda: {name: True for name in FAMILY_NAMES})
    #: a wrong answer paid above the bare right answer: reported (warn), a failure (fail) or not looked for (off)
    inversions: str = "warn"
    written: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The section as written, for :func:`rewardkit.config.spec_to_dict`."""
        return dict(self.written)


def parse_stress(spec: Any, terms: Collection[str], *, source: str | None = None,
                 path: str = "stress") -> StressSettings | None:
    """Validate a ``stress:`` mapping against the config's top-level ``terms``; None when absent."""
    if spec is None:
        return None
    if not isinstance(spec, Mapping):
        raise ConfigError(f"expected a mapping with any of: {', '.join(STRESS_KEYS)}, got {describe(spec)}",
                          source=source, path=path)
    errors = [ConfigError(f"unknown key; expected one of: {', '.join(STRESS_KEYS)}", source=source,
                          path=f"{path}.{key}") for key in spec if key not in STRESS_KEYS]
    gold = spec.get("gold")
    if gold is not None and not (isinstance(gold, str) and gold in terms):
        errors.append(ConfigError(f"expected the name of a top-level term ({', '.join(sorted(terms))}), "
                                  f"got {describe(gold)}", source=source, path=f"{path}.gold"))
    margin = _number(spec, "margin", 0.0, path, source, errors, low=0.0, high=math.inf, what="a number >= 0")
    budget = _number(spec, "budget_s", DEFAULT_BUDGET_S, path, source, errors, low=0.0, high=MAX_BUDGET_S,
                     what=f"a number of seconds above 0 and at most {MAX_BUDGET_S:g}", open_low=True)
    families = {name: True for name in FAMILY_NAMES}
    given = spec.get("families")
    if given is not None:
        if not isinstance(given, Mapping):
            errors.append(ConfigError(f"expected a mapping of family names to true or false "
                                      f"({', '.join(FAMILY_NAMES)}), got {describe(given)}",
                                      source=source, path=f"{path}.families"))
        else:
            for name, on in given.items():
                where = f"{path}.families.{name}"
                if name not in families:
                    errors.append(ConfigError(f"unknown family; expected one of: {', '.join(FAMILY_NAMES)}",
                                              source=source, path=where))
                elif not isinstance(on, bool):
                    errors.append(ConfigError(f"expected true or false, got {describe(on)}", source=source, path=where))
                else:
                    families[name] = on
    inversions = spec.get("inversions", "warn")
    if inversions not in INVERSION_MODES:
        errors.append(ConfigError(f"expected one of: {', '.join(INVERSION_MODES)}, got {describe(inversions)}",
                                  source=source, path=f"{path}.inversions"))
        inversions = "warn"
    if errors:
        raise ConfigError.combine(errors)
    return StressSettings(gold, margin, budget, families, inversions, dict(spec))


def _number(spec: Mapping, key: str, default: float, path: str, source: str | None, errors: list[ConfigError], *,
            low: float, high: float, what: str, open_low: bool = False) -> float:
    value = spec.get(key, default)
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and \
        (value > low if open_low else value >= low) and value <= high
    if not ok:
        errors.append(ConfigError(f"expected {what}, got {describe(value)}", source=source, path=f"{path}.{key}"))
        return default
    return float(value)
