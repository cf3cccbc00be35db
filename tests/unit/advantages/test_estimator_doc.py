"""docs/estimators.md's table of estimator facts is the registry's, and the recipe names where they live."""

from __future__ import annotations

from pathlib import Path

from lecritique.advantages import estimator_classes

DOCS = Path(__file__).resolve().parents[3] / "docs"


def facts_table() -> str:
    """The table as the registry declares it (paste it into docs/estimators.md when it changes)."""
    lines = [
        "| estimator | uses a critic | critic values | first policy step | smallest group | options |",
        "|---|---|---|---|---|---|",
    ]
    for cls in estimator_classes():
        values = (
            "-"
            if not cls.uses_critic
            else "hindsight admitted"
            if cls.admits_hindsight
            else "prefix only (eq. 5)"
        )
        options = ", ".join(f"`{name}`" for name in cls.Spec.model_fields if name != "name") or "-"
        critic = "yes" if cls.uses_critic else "no"
        first = (
            "at once"
            if not cls.uses_critic
            else "at once, critic-free until the critic is warm"
            if cls.steps_while_critic_warms
            else "after a trained critic's warm-up"
        )
        lines.append(f"| `{cls.name}` | {critic} | {values} | {first} | {cls.min_group_size} | {options} |")
    return "\n".join(lines)


def test_the_estimators_doc_table_is_the_registry_s():
    assert facts_table() in (DOCS / "estimators.md").read_text(), "\n" + facts_table()


def test_the_new_estimator_recipe_names_the_class_as_the_one_home_of_its_facts():
    architecture = (DOCS / "ARCHITECTURE.md").read_text()
    recipe = next(line for line in architecture.splitlines() if line.startswith("| a new estimator |"))
    for fact in (
        "Spec",
        "uses_critic",
        "steps_while_critic_warms",
        "admits_hindsight",
        "min_group_size",
        "ignored_values",
    ):
        assert fact in recipe, fact
    assert "options.py" not in architecture and "config/estimators.py" not in recipe
