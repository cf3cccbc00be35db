"""Run reports: ``metrics.jsonl`` -> ``report.png`` (curves) and ``report.md`` (summary)."""

from lecritique.reporting.report import load_metrics, summarize, write_report

__all__ = ["load_metrics", "summarize", "write_report"]
