"""Launchers: run an experiment's services as local processes or as Kubernetes workloads.

Three rooms and what they share:

- :mod:`.kubernetes` renders one experiment into Kubernetes objects (pure functions: names, pods,
  resources, network policies, multi-pod trainers) and launches, watches and deletes them
  (:mod:`.kubernetes.launcher`, the API's ``kubernetes`` launcher).
- :mod:`.local` runs one experiment's services as local processes on loopback and keeps them up
  (:mod:`.local.launcher`, what ``lecritique run`` uses; processes, restarts, signals).
- :mod:`.api_local` is the API's ``local`` launcher: each experiment is ``lecritique run`` in a
  session of its own that outlives the API (:mod:`.api_local.launcher`), recorded by
  :mod:`.api_local.run_and_record` and found again by pid (:mod:`.api_local.process_tree`).

Shared by them: the launcher interface (:mod:`.base`), the components and the chart's defaults
for them (:mod:`.components`), the Redis ACL users (:mod:`.redis_acl`) and host paths kept out of
what a tenant reads (:mod:`.host_paths`), and a tenant's policy as findings (:mod:`.tenant_findings`).
"""
