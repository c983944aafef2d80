"""Benchmark results read back: what a run measured, beside what the plan predicted for that load.

* :mod:`planner.benchimport.readers`  the formats (``vllm bench serve`` result JSON, guidellm's and aiperf's
  benchmark report JSON, a Prometheus text scrape of vLLM's ``/metrics``), each to :class:`Measured`;
* :mod:`planner.benchimport.compare`  :func:`compare`: the plan's figures at the run's load, the
  ratios, and the calibration string a plan file and a share link keep.

Every file is untrusted: its size, its nesting, every field's type and range and the time spent
reading it are bounded, and a bad file is refused in one line naming the field (:class:`PlannerError`).
"""

from planner.benchimport.compare import Comparison, compare, format_calibration, parse_calibration
from planner.benchimport.readers import FORMATS, Measured, read_result

__all__ = ["FORMATS", "Comparison", "Measured", "compare", "format_calibration", "parse_calibration", "read_result"]
