"""The sandbox's child side: set up the isolation layers, verify them, run one untrusted call.

Started by :mod:`lecritique.envs.sandbox` through ``_sandbox_child.py``, which imports this
package as the top-level ``_sandbox`` (not as ``lecritique.envs._sandbox``: that would import
every environment into the child). Hence only the standard library, pyseccomp and relative imports.
"""
