"""Critics behind the value evaluator's ``Evaluate`` RPC (``docs/critics.md``).

- ``kinds``: the table of critic kinds (spec class, backend, trainer, estimators, pod needs);
- ``specs``: the spec's ``critic`` section of every kind; ``types``: the backend interface;
- ``inputs``: what every critic is shown: privileged contexts (PVF) and group peers (LVRL);
- ``discriminative``, ``generative`` (GenAC), ``frozen_llm`` (LVRL): the kinds;
- ``generative_trainer``: REINFORCE for the generative critic (GenAC §5.2);
- ``segments``, ``states``, ``prompts``, ``scoring``, ``icc``: what text critics read and write;
- ``llm``, ``openai_client``, ``openai_server``: generation on rollout engines and over HTTP.

Papers: PVF is *Le Critique: Privileged Value Functions for LLM Reinforcement Learning*
(arXiv:2608.16739); GenAC is *Bringing Value Models Back: Generative Critics for Value Modeling
in LLM Reinforcement Learning* (arXiv:2604.10701); LVRL is *LLM Value Functions for Credit
Assignment in Agentic RL* (Zhu et al., 2026).
"""
