"""Critics behind the value evaluator's ``Evaluate`` RPC (``docs/critics.md``).

- ``context``: privileged critic contexts (PVF) and group peers (LVRL);
- ``backends``: the interface of every critic kind, ``build_backend``;
- ``discriminative``, ``generative`` (GenAC), ``frozen_llm`` (LVRL): the kinds;
- ``generative_trainer``: REINFORCE for the generative critic (GenAC §5.2);
- ``segments``, ``states``, ``prompts``, ``scoring``, ``icc``: what text critics read and write;
- ``llm``, ``openai_client``, ``openai_server``: generation on rollout engines and over HTTP.
"""
