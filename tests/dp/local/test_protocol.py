"""The slot protocol, the population ledger's scale, and the collection request format."""

from __future__ import annotations

import time

import msgpack
import numpy as np
import pytest

from app.dp import registry
from app.dp.errors import ParameterError
from app.dp.local.base import ProtocolError
from app.dp.local.population import CohortUnavailableError, Population
from app.dp.local.wire import CollectionRequest, Tally, mask_users

MILLION = 1_000_000
PLAN_BUDGET_S = 0.1
REQUEST_LIMIT_BYTES = 64 * 1024


@pytest.mark.parametrize("name", ["lpd", "lpa", "lpu", "lsp"])
def test_a_million_users_plan_fast_with_small_requests(name):
    m = registry.create(name, d=117, eps=1.0, w=20, users=MILLION)
    rng = np.random.default_rng(0)
    start = time.perf_counter()
    request = m.open_slot(rng)
    elapsed = time.perf_counter() - start
    assert elapsed < PLAN_BUDGET_S
    packed = msgpack.packb(request.to_dict(), use_bin_type=True)
    assert len(packed) < REQUEST_LIMIT_BYTES
    back = CollectionRequest.from_dict(msgpack.unpackb(packed, raw=False))
    assert back == request


def test_lpd_publication_round_at_a_million_users():
    m = registry.create("lpd", d=2, eps=1.0, w=20, users=MILLION)
    rng = np.random.default_rng(0)
    dc = m.open_slot(rng)
    n = int(mask_users(dc, MILLION).sum())
    assert n == m.population.users_in(dc.cohort_buckets()) <= MILLION // 40
    start = time.perf_counter()
    pub = m.on_tally(Tally(1, "dissimilarity", [[n, 0]], [n]), rng)  # r_0 = 0: a big change
    assert time.perf_counter() - start < PLAN_BUDGET_S
    assert pub is not None and pub.round == "publication"
    assert len(msgpack.packb(pub.to_dict(), use_bin_type=True)) < REQUEST_LIMIT_BYTES
    assert not (mask_users(dc, MILLION) & mask_users(pub, MILLION)).any()  # U_{t,1} and U_{t,2}


def test_protocol_out_of_order_is_refused():
    m = registry.create("lbd", d=2, eps=1.0, w=4, users=10)
    rng = np.random.default_rng(0)
    with pytest.raises(ProtocolError):
        m.close_slot()
    req = m.open_slot(rng)
    with pytest.raises(ProtocolError):
        m.open_slot(rng)
    with pytest.raises(ProtocolError):
        m.on_tally(Tally(1, "publication", [[5, 5]], [10]), rng)
    with pytest.raises(ParameterError, match="at most"):
        m.on_tally(Tally(1, req.round, [[5, 6]], [11]), rng)


def test_device_membership_matches_the_service_cohort():
    m = registry.create("lpa", d=3, eps=1.0, w=5, users=1_000, buckets=64)
    req = m.open_slot(np.random.default_rng(4))
    asked = [u for u in range(1_000) if req.asks(u)]
    assert asked == np.flatnonzero(mask_users(req, 1_000)).tolist()
    assert len(asked) == m.population.users_in(req.cohort_buckets()) > 0


def test_population_refuses_a_bucket_within_its_window():
    pop = Population(users=20, buckets=10, w=3)
    pop.mark(5, [1, 2])
    with pytest.raises(CohortUnavailableError, match="available from slot 8"):
        pop.mark(7, [2])
    pop.mark(8, [2])
    assert pop.available_users(8) == 18


@pytest.mark.parametrize(
    ("params", "match"),
    [
        ({"users": 10, "w": 6}, "users must be at least 2w"),
        ({"users": 100, "w": 6, "buckets": 11}, "buckets must be at least 2w"),
        ({"users": 100, "w": 6, "buckets": 101}, "buckets must be at most"),
        ({"users": 100, "w": 6, "min_users": 0}, "min_users"),
        ({"users": 100, "w": 6, "oracle": "rappor"}, "oracle"),
    ],
)
def test_lpd_parameter_rules(params, match):
    with pytest.raises(ParameterError, match=match):
        registry.create("lpd", d=2, eps=1.0, **params)


def test_lsp_offset_rule():
    with pytest.raises(ParameterError, match="offset"):
        registry.create("lsp", d=2, eps=1.0, w=3, users=9, offset=3)


def test_mid_slot_restart_resends_the_pending_request():
    a = registry.create("lpd", d=2, eps=1.0, w=3, users=60)
    req = a.open_slot(np.random.default_rng(0))
    b = registry.create("lpd", d=2, eps=1.0, w=3, users=60)
    b.load_state(a.state_dict())
    assert b.pending == req
