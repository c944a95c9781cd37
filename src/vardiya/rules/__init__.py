"""Pure rules the store applies and the engine and the planner share: dedup, batch cuts, handler calls.

Nothing here touches a database, a file or the clock. The store decides by these rules inside its
transactions; the planner replays them in memory (``plan.replay``, ``plan.gate``) and the engine
builds their values (``invoke.execute``), without importing the store to reach them. The store
re-exports each name where it has always been imported from.
"""
