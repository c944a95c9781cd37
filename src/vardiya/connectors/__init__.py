"""Connectors to the user's own data: SQL sources, file and table sinks, the slot index, sensors' queries.

These are not the state store. They read and write the databases and files a job works on, with their
own SQLAlchemy, and never touch a table of ``vardiya.store.schema``; the store (``vardiya.store``)
owns every statement on vardiya's own tables. Their public names are re-exported where they have
always been imported from (``vardiya.slots``, ``vardiya.slots.sql_source``, ``vardiya.slots.sinks``,
``vardiya.slots.index``).

- ``sql_source``: a table of the user's database as a slot job's source, with slot pushdown.
- ``slot_index``: ``vardiya slots index``, a stored slot column and its index on the user's table.
- ``sinks``: atomic file outputs and idempotent table upserts.
- ``arrival``: a ``DataArrival`` sensor's query on the user's database.
"""
