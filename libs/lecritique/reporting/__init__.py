"""Run reports: ``metrics.jsonl`` -> ``report.png`` (curves) and ``report.md`` (summary); several runs
compared: ``compare.png`` and ``compare.md`` (:mod:`~lecritique.reporting.compare`)."""

from lecritique.reporting.compare import write_comparison
from lecritique.reporting.report import load_metrics, summarize, write_report

__all__ = ["load_metrics", "summarize", "write_comparison", "write_report"]
