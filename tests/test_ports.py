"""shared.ports: a message key's own task id is the uuid5 of json.dumps([owner, messageId,
digest]) (every id derived since depends on it), and is the same at every ask."""

from __future__ import annotations

import json
import uuid

from hypothesis import given
from hypothesis import strategies as st

from shared.ports import _TASK_IDS, MessageKey


@given(owner=st.text(), message_id=st.text(), digest=st.text())
def test_a_key_s_task_id_is_the_uuid5_of_its_json_names(
    owner: str, message_id: str, digest: str
) -> None:
    key = MessageKey(message_id, digest)
    expected = str(uuid.uuid5(_TASK_IDS, json.dumps([owner, message_id, digest])))
    assert key.task_id(owner) == expected
    assert key.task_id(owner) == expected  # asked again (memo)
    assert key.task_id(owner + "x") != expected
