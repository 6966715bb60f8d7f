"""Hypothesis operations on one stream's collect stage, with hostile ``preferences`` records.

Shared by the preference property test (:mod:`tests.stream.test_preferences_property`) and the
worker/verify agreement test (:mod:`tests.verify.test_worker_agreement`): three users, each
always sending its own value (user ``i`` sends value ``i``, so each cell of a slot's counts has
one user), and the operations ``("tick", seconds)``, ``("event", user, seconds back)`` and
``("pref", user, index into PREFERENCE_VALUES, Kafka time relative to now or None)``.
"""

from __future__ import annotations

import msgpack
from hypothesis import strategies as st

USERS = ("u0", "u1", "u2")
PREFERENCE_VALUES = [
    msgpack.packb({"level": "strict"}),
    msgpack.packb({"level": "loose"}),
    msgpack.packb({"level": "mid"}),
    msgpack.packb({"level": "nope"}),  # unknown level: the default, through the gap
    msgpack.packb({"level": 3}),  # malformed
    b"\xc1",  # undecodable
    None,  # tombstone
]

tick = st.tuples(st.just("tick"), st.floats(0.5, 14.0))
event = st.tuples(st.just("event"), st.sampled_from(USERS), st.floats(0.0, 2.5))
preference = st.tuples(
    st.just("pref"),
    st.sampled_from(USERS),
    st.sampled_from(range(len(PREFERENCE_VALUES))),
    st.one_of(  # the record's Kafka timestamp, relative to now (None: backdated to 0)
        st.none(), st.floats(-60.0, 60.0)
    ),
)
