"""``last_predicate_error`` as Cloacina stores it: ``truncate_predicate_text``
(its ``PREDICATE_TEXT_TRUNCATE_LEN`` of 240 characters, then ``…[truncated]``)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from fanoutsim.designs.reactor.predicate import PREDICATE_TEXT_LIMIT, TRUNCATED_MARKER, truncate_predicate_text

# any code point, surrogates and astral ones included, around the limit and far past it
TEXTS = st.text(alphabet=st.characters(), min_size=0, max_size=600)


def _utf8(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")  # a lone surrogate too, as Python holds it


@given(TEXTS, st.integers(min_value=0, max_value=300))
def test_a_cut_keeps_whole_characters_up_to_the_limit_and_marks_it(text, limit):
    out = truncate_predicate_text(text, limit)
    assert len(out) <= limit + len(TRUNCATED_MARKER)
    if len(text) <= limit:
        assert out == text  # nothing dropped, no marker
        return
    assert out.endswith(TRUNCATED_MARKER)  # something dropped: the marker says so
    head = out[: -len(TRUNCATED_MARKER)]
    assert len(head) == limit  # the limit counts the characters kept, not the marker
    # on a character boundary: the kept bytes are a prefix of the text's, no code point split
    assert _utf8(text).startswith(_utf8(head))
    assert len(_utf8(head)) < len(_utf8(text))


@given(st.text(alphabet=st.characters(), min_size=PREDICATE_TEXT_LIMIT + 1, max_size=800))
def test_cloacinas_limit_is_240_characters_before_the_marker(text):
    out = truncate_predicate_text(text)
    assert out == text[:240] + "…[truncated]"
    assert len(out) == 240 + len("…[truncated]") == 252


def test_a_multibyte_text_is_cut_by_characters_not_bytes():
    """Cloacina's own test: ``"é" * 290`` keeps 240 ``é`` (480 bytes) and the marker."""
    out = truncate_predicate_text("é" * (PREDICATE_TEXT_LIMIT + 50))
    assert out == "é" * 240 + TRUNCATED_MARKER
    assert truncate_predicate_text("payload.x > 1") == "payload.x > 1"
    assert truncate_predicate_text("a" * 240) == "a" * 240  # exactly the limit: untouched
