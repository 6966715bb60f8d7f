"""The public wire: one frozen type and one codec per record of a public topic.

========================  ==========================  =====================================
topic                     type                        codec
========================  ==========================  =====================================
``events``                :class:`events.Event`       :mod:`app.wire.events`
``preferences``           :class:`preferences.Preference`  :mod:`app.wire.preferences`
``collection-requests``   :class:`requests.RequestRecord`  :mod:`app.wire.requests`
``reports``               :class:`reports.Report`     :mod:`app.wire.reports`
``releases``              :class:`releases.SlotRelease`    :mod:`app.wire.releases`
``audit``                 :class:`audit.AuditRecord`  :mod:`app.wire.audit`
``dead-letter``           :class:`dead_letters.DeadLetter`  :mod:`app.wire.dead_letters`
========================  ==========================  =====================================

Each codec module has ``VERSION``, its record type, ``encode`` and ``decode`` (dead letters are
only written). Every value is a msgpack map (:mod:`app.wire.codec`); ``docs/wire.md`` documents
every field for the pipelines that read the topics, and the compatibility policy. This package
is the only place in ``app`` that turns a public record into bytes or back
(``tests/wire/test_only_place.py``); the internal wire between the service's own processes is
:mod:`app.stream.internal`. It depends on :mod:`app.dp` only, so the SDK reads it without the
service.
"""
