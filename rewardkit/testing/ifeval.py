"""IFEval's own instruction checkers (lm-eval's ``ifeval`` task), for holding the instruction terms
against them.

lm-eval's package ``__init__`` files import the whole harness (about 30 packages); the checkers need
only nltk, langdetect and immutabledict. :func:`ifeval_instructions` imports the checker modules
alone, under empty parent packages, so ``pip install -c constraints.txt -e '.[ifeval]'`` plus
``pip install --no-deps lm-eval`` is enough. Nothing is downloaded: nltk's ``download`` is turned
off (the checkers used here never read its tokenizer data).
"""

from __future__ import annotations

import functools
import importlib.util
import sys
import types
from typing import Any

INSTALL = "pip install -c constraints.txt -e '.[ifeval]' && pip install --no-deps lm-eval==0.4.13"


@functools.lru_cache(maxsize=1)
def ifeval_instructions() -> dict[str, Any]:
    """lm-eval's IFEval registry: instruction id (``"startend:end_checker"``) -> checker class."""
    spec = importlib.util.find_spec("lm_eval")
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(f"IFEval's checkers need lm-eval: {INSTALL}")
    root = spec.submodule_search_locations[0]
    for name, sub in (("lm_eval", ""), ("lm_eval.tasks", "/tasks"), ("lm_eval.tasks.ifeval", "/tasks/ifeval")):
        if name not in sys.modules:
            package = types.ModuleType(name)
            package.__path__ = [root + sub]
            sys.modules[name] = package
    import nltk

    nltk.download = lambda *args, **kwargs: False  # asked for at import; never read by these checkers
    from lm_eval.tasks.ifeval import instructions_registry

    return dict(instructions_registry.INSTRUCTION_DICT)


def ifeval_follows(instruction: str, text: str, **kwargs: Any) -> bool:
    """IFEval's verdict: whether ``text`` follows ``instruction`` built with ``kwargs`` (its strict mode)."""
    checker = ifeval_instructions()[instruction](instruction)
    checker.build_description(**kwargs)
    return bool(checker.check_following(text))
