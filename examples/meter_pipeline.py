"""The meter-readings pipeline for ``vardiya pipeline ... examples/meter_pipeline.py:pipeline``.

``pipeline_missing_edge`` is the same pipeline with consumption's cross-period edge left out (try it
with ``--strict``). The code is ``vardiya.examples.meter_pipeline``; outputs go under the root the run
is given.
"""

from vardiya.examples.meter_pipeline import pipeline, pipeline_missing_edge

__all__ = ["pipeline", "pipeline_missing_edge"]
