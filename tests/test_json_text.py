"""shared.json_text: encoders built once write what json.dumps writes with the same options."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shared.json_text import encoder

values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@given(values, st.booleans(), st.booleans())
def test_the_text_is_json_dumps_s(value: Any, sort_keys: bool, ensure_ascii: bool) -> None:
    written = encoder(sort_keys=sort_keys, ensure_ascii=ensure_ascii)(value)
    expected = json.dumps(
        value, sort_keys=sort_keys, ensure_ascii=ensure_ascii, separators=(",", ":")
    )
    assert written == expected


def test_what_json_has_no_form_for_is_refused_naming_its_type() -> None:
    with pytest.raises(TypeError, match="set is not JSON"):
        encoder()({"a": {1}})
    with pytest.raises(ValueError, match="not JSON compliant"):
        encoder(allow_nan=False)([float("nan")])
