"""The instruction-constraint components (``word_count_bounds``, ``keywords``, ``bullet_count``,
``ends_with``, ``json_keys``): what each promises beyond its declarations (the generic checks run
in test_component_properties.py), and agreement with IFEval's own checkers in ``lm-eval``."""

from __future__ import annotations

import importlib.util
import json
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rewardkit import RewardComposer
from rewardkit.components import BulletCount, EndsWith, JsonKeys, Keywords, WordCountBounds
from rewardkit.components.json_keys import parse_object
from rewardkit.errors import ConfigError
from rewardkit.testing.ifeval import ifeval_follows, ifeval_instructions

pytestmark = pytest.mark.filterwarnings("error")
FAST = settings(max_examples=60, deadline=None)
WORD = st.text(alphabet="abcdefghij", min_size=1, max_size=6)


# ---- word_count_bounds ---------------------------------------------------------------------------
@FAST
@given(words=st.lists(WORD, max_size=30), low=st.integers(0, 20), span=st.integers(0, 20), soft=st.floats(0, 20))
def test_word_count_bounds_is_one_inside_and_falls_with_the_distance_outside(words, low, span, soft):
    text, high = " ".join(words), low + span
    term = WordCountBounds(name="w", soft=soft)
    value = term.score(text, float(low), float(high) if high > 0 else 0.0)
    n = len(words)
    if (low <= 0 or n >= low) and (high <= 0 or n <= high):
        assert value == 1.0
    else:
        distance = max(low - n, n - high)
        assert value == pytest.approx(max(0.0, 1 - distance / soft) if soft > 0 else 0.0)


def test_word_count_bounds_counts_word_runs_and_treats_non_positive_bounds_as_none():
    term = WordCountBounds(name="w")
    assert term.score("don't stop -- now", 4.0, 4.0) == 1.0  # don, t, stop, now
    assert term.score("one two three", 0.0, 0.0) == 1.0 and term.score("", -3.0, 0.0) == 1.0
    assert term.score("one two three", 4.0, 0.0) == 0.0
    assert WordCountBounds(name="w", soft=2).score("one two three", 4.0, 0.0) == 0.5


# ---- keywords ------------------------------------------------------------------------------------
@FAST
@given(present=st.lists(WORD, min_size=1, max_size=4, unique=True), absent=st.lists(WORD, max_size=4, unique=True))
def test_keywords_scores_the_share_of_items_satisfied(present, absent):
    absent = [w for w in absent if w not in present]
    text = "Start " + " ".join(w.upper() for w in present) + " end."  # case does not matter
    wanted = "|".join(present + absent)
    include = Keywords(name="k", mode="include")
    exclude = Keywords(name="k", mode="exclude")
    share = len(present) / len(present + absent)
    assert include.score(text, wanted) == pytest.approx(share)
    assert exclude.score(text, wanted) == pytest.approx(1 - share)
    assert Keywords(name="k", partial=False).score(text, wanted) == (1.0 if not absent else 0.0)


def test_keywords_word_and_substring_matching_and_empty_items():
    word, substring = Keywords(name="k", match="word"), Keywords(name="k", match="substring")
    assert word.score("the cathedral", "cat") == 0.0 and substring.score("the cathedral", "cat") == 1.0
    assert word.score("a cat.", "cat") == 1.0
    no_commas = Keywords(name="k", mode="exclude", match="substring")
    assert no_commas.score("one, two", ",") == 0.0 and no_commas.score("one two", ",") == 1.0
    assert word.score("anything", "") == 1.0 and word.score("anything", " | ") == 1.0
    with pytest.raises(ConfigError, match="mode"):
        RewardComposer.from_dict({"version": 1, "components": {"k": {"type": "keywords", "params": {"mode": "some"}}}})


def test_keywords_any_is_one_when_at_least_one_item_appears():
    any_of = Keywords(name="k", mode="any")
    assert any_of.score("The kitten slept.", "kitten|purr|paws") == 1.0
    assert any_of.score("The dog slept.", "kitten|purr|paws") == 0.0
    assert any_of.score("catsup", "cat") == 0.0
    assert Keywords(name="k", mode="any", match="substring").score("catsup", "cat") == 1.0
    assert any_of.score("anything", "") == 1.0  # nothing asked: no constraint


# ---- bullet_count --------------------------------------------------------------------------------
@FAST
@given(found=st.integers(0, 6), wanted=st.integers(1, 6), star=st.booleans())
def test_bullet_count_exact_and_partial(found, wanted, star):
    marker = "* " if star else "- "
    text = "Here:\n" + "\n".join(f"{marker}item {i}" for i in range(found)) + "\n**Bold** is no bullet."
    assert BulletCount(name="b", partial=False).score(text, float(wanted)) == (1.0 if found == wanted else 0.0)
    assert BulletCount(name="b").score(text, float(wanted)) == pytest.approx(max(0.0, 1 - abs(found - wanted) / wanted))
    assert BulletCount(name="b").score(text, 0.0) == 1.0  # not asked


# ---- ends_with -----------------------------------------------------------------------------------
def test_ends_with_strips_ignores_case_and_grades_an_earlier_phrase():
    term = EndsWith(name="e", elsewhere=0.5)
    assert term.score("Some text. THAT IS ALL.  \n", "That is all.") == 1.0
    assert term.score("That is all. And more.", "That is all.") == 0.5
    assert EndsWith(name="e").score("That is all. And more.", "That is all.") == 0.0
    assert term.score("whatever", "") == 1.0
    with pytest.raises(ConfigError, match="elsewhere"):
        RewardComposer.from_dict({"version": 1, "components": {"e": {"type": "ends_with", "params": {"elsewhere": 2}}}})


# ---- json_keys -----------------------------------------------------------------------------------
@FAST
@given(keys=st.lists(WORD, min_size=1, max_size=3, unique=True), kept=st.integers(0, 3), fenced=st.booleans())
def test_json_keys_full_and_partial_credit(keys, kept, fenced):
    kept = min(kept, len(keys))
    text = json.dumps({k: 1 for k in keys[:kept]})
    if fenced:
        text = f"```json\n{text}\n```"
    wanted = "|".join(keys)
    share = kept / len(keys)
    assert JsonKeys(name="j", partial=False).score(text, wanted) == (1.0 if kept == len(keys) else 0.0)
    assert JsonKeys(name="j").score(text, wanted) == pytest.approx(1.0 if share == 1 else 0.5 + 0.5 * share)


def test_json_keys_grades_text_that_is_not_an_object():
    term = JsonKeys(name="j")
    assert term.score('Sure! {"name": "x", "color": "y"}', "name|color") == 0.25  # quoted keys, not one object
    assert term.score("[1, 2]", "name") == 0.0 and term.score("{broken", "name") == 0.0
    assert term.score("[1, 2]", "") == 1.0 and term.score("", " | ") == 1.0  # no keys asked: no constraint


# ---- agreement with IFEval's checkers (lm-eval) ---------------------------------------------------
def ifeval_registry() -> dict:
    for name in ("nltk", "langdetect", "immutabledict"):
        pytest.importorskip(name, reason="pip install -c constraints.txt -e '.[ifeval]' (make test installs it)")
    if "lm_eval" not in sys.modules and importlib.util.find_spec("lm_eval") is None:
        pytest.skip("lm-eval is absent: pip install --no-deps lm-eval==0.4.13 (make test installs it)")
    return ifeval_instructions()


def ifeval_check(registry, instruction: str, text: str, **kwargs) -> bool:
    assert registry is ifeval_instructions()
    return ifeval_follows(instruction, text, **kwargs)


LINES = st.sampled_from(["- a point", "* another one", "**Bold** words here", "plain words, and more", "",
                         "  - indented", "Thank you.", "the river runs", "cats and dogs"])


@settings(max_examples=150, deadline=None)
@given(lines=st.lists(LINES, max_size=8), low=st.integers(1, 12), high=st.integers(1, 30), n=st.integers(1, 5),
       word=st.sampled_from(["river", "cats", "blue"]), ending=st.sampled_from(["Thank you.", "runs", "That is all."]))
def test_binary_terms_agree_with_ifeval_checkers(lines, low, high, n, word, ending):
    registry = ifeval_registry()
    text = "\n".join(lines)
    # IFEval's number_words: "at least" low and "less than" high + 1 together are our bounds
    ifeval_words = (ifeval_check(registry, "length_constraints:number_words", text, num_words=low, relation="at least")
                    and ifeval_check(registry, "length_constraints:number_words", text, num_words=high + 1,
                                     relation="less than"))
    assert (WordCountBounds(name="w").score(text, float(low), float(high)) == 1.0) == ifeval_words
    assert (BulletCount(name="b", partial=False).score(text, float(n)) == 1.0) == ifeval_check(
        registry, "detectable_format:number_bullet_lists", text, num_bullets=n)
    assert (Keywords(name="k", match="substring", partial=False).score(text, word) == 1.0) == ifeval_check(
        registry, "keywords:existence", text, keywords=[word])
    assert (Keywords(name="k", mode="exclude", partial=False).score(text, word) == 1.0) == ifeval_check(
        registry, "keywords:forbidden_words", text, forbidden_words=[word])
    assert (Keywords(name="k", mode="exclude", match="substring").score(text, ",") == 1.0) == ifeval_check(
        registry, "punctuation:no_comma", text)
    assert (EndsWith(name="e").score(text, ending) == 1.0) == ifeval_check(registry, "startend:end_checker", text,
                                                                          end_phrase=ending)


@settings(max_examples=60, deadline=None)
@given(value=st.dictionaries(WORD, st.integers(), max_size=3) | st.lists(st.integers(), max_size=2),
       fenced=st.booleans(), noise=st.sampled_from(["", "Sure: ", " trailing"]))
def test_json_object_check_agrees_with_ifeval_json_format(value, fenced, noise):
    registry = ifeval_registry()
    text = json.dumps(value)
    text = f"```json\n{text}\n```" if fenced else text
    text = noise + text if noise.endswith(" ") else text + noise
    ifeval_json = ifeval_check(registry, "detectable_format:json_format", text)
    ours = parse_object(text) is not None
    assert ours == (ifeval_json and isinstance(value, dict))  # IFEval accepts any JSON value; we ask for an object
    if ours and value:
        assert JsonKeys(name="j", partial=False).score(text, "|".join(value)) == 1.0


def test_a_lone_star_line_is_not_a_bullet_where_ifeval_counts_it_with_the_next_line():
    registry = ifeval_registry()
    text = "*\n- the one item"
    assert BulletCount(name="b", partial=False).score(text, 1.0) == 1.0
    # IFEval's "^\\s*\\*[^\\*].*$" lets [^*] be the line break: "*\n- the one item" is a star bullet, and a dash one
    assert ifeval_check(registry, "detectable_format:number_bullet_lists", text, num_bullets=2)
    assert BulletCount(name="b", partial=False).score("*\n*", 1.0) == 0.0


def test_an_ending_is_lower_cased_as_ifeval_does_not_case_folded_so_look_alikes_are_not_paid():
    registry = ifeval_registry()
    for text, phrase in (("That is the endſ", "the ends"), ("Gruß", "gruss"), ("THANK YOU.", "thank you.")):
        assert (EndsWith(name="e").score(text, phrase) == 1.0) == ifeval_check(
            registry, "startend:end_checker", text, end_phrase=phrase)
    assert EndsWith(name="e").score("That is the endſ", "the ends") == 0.0
