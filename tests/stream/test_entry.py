"""The ledger entry keeps its local-mode fields apart, and the bytes earlier releases wrote."""

from __future__ import annotations

import msgpack

from app.stream.release.entry import LedgerEntry, LocalRound


def test_an_earlier_flat_entry_decodes_and_encodes_to_the_same_map():
    flat = {
        "state": {"t": 3},
        "next_slot": 12,
        "outbox": [["releases", b"r"]],
        "published": False,
        "recent": [[11, 1.0]],
        "offset": 7,
        "request": b"q",
        "sent": False,
        "deadline": 99.5,
        "levels": {"u": 1},
        "seq": 4,
    }
    entry = LedgerEntry.decode(msgpack.packb(flat))
    assert entry.local == LocalRound(
        offset=7, request=b"q", sent=False, deadline=99.5, levels={"u": 1}
    )
    assert (entry.next_slot, entry.outbox, entry.seq) == (12, [("releases", b"r")], 4)
    assert msgpack.unpackb(entry.encode()) == flat


def test_a_central_entry_has_the_local_defaults():
    entry = LedgerEntry(state={"t": 1}, next_slot=5)
    assert LedgerEntry.decode(entry.encode()) == entry
    assert entry.local == LocalRound()
