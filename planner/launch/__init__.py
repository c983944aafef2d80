"""What a user runs after planning: serve lines per pool, a Kubernetes manifest, the benchmark that checks the plan.

* :mod:`planner.launch.serve`  ``vllm serve`` / ``sglang.launch_server`` lines for each pool and the router;
* :mod:`planner.launch.llmd`   llm-d's Helm values (the llm-d-modelservice chart) for the deployment;
* :mod:`planner.launch.bench`  ``vllm bench serve`` and ``guidellm benchmark`` with the plan's workload.
"""
