"""The prefix cache as a session workload sees it: hit rates per tier and what they save.

* ``workload.py``  :class:`SessionWorkload`: sessions of turns with think time, a shared prefix
                   per tenant, documents from a catalog with Zipf popularity; the context as
                   segments of whole cache units;
* ``hitrate.py``   expected hits of an LRU cache of a given size (Che's characteristic time);
* ``tiers.py``     the GPU pool, CPU DRAM and local NVMe of a replica: capacity in tokens per
                   the engine's layout, links and prices;
* ``timing.py``    what a turn costs: load from a lower tier or recompute, whichever is faster;
* ``section.py``   the plan's ``cache`` section (hit rate, tiers, TTFT with and without them,
                   GPU time and cost) and the sweep over CPU tier sizes;
* ``engines.py``   the engines' flags for the same tiers (vLLM offloading, LMCache, SGLang HiCache).

The tiered LRU simulator that checks the model is :mod:`planner.simulate.sessions`.
"""

from planner.cache.hitrate import TierFit, fit_tier, hit_rate
from planner.cache.tiers import Tier
from planner.cache.timing import TurnTiming, choose_loads
from planner.cache.workload import SessionWorkload, zipf_groups

__all__ = ["SessionWorkload", "Tier", "TierFit", "TurnTiming", "choose_loads", "fit_tier", "hit_rate", "zipf_groups"]
