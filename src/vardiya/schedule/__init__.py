"""When things run: the catch-up policy after downtime, pipeline triggers, and the planned times of
every schedule. Pure: nothing here reads a clock or a store (the scheduler in ``vardiya.service`` does).
"""

from ..catchup import CatchUpPolicy, Decision, decide
from .periodic import Periodic
from .triggers import Cron, DataArrival, PeriodClose, Trigger, Upstream

__all__ = ["CatchUpPolicy", "Cron", "DataArrival", "Decision", "PeriodClose", "Periodic", "Trigger", "Upstream", "decide"]
