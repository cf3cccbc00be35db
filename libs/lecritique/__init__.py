"""lecritique: reinforcement learning of LLMs with learned value functions.

The library is pure where it can be (estimators, critic contexts, replay semantics) and the
services in ``services/`` are thin adapters around it.
"""

__version__ = "0.1.0"
