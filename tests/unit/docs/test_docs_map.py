"""docs/README.md is a one-screen map of the docs (issue 48 item 10), and README.md opens with a
results-at-a-glance table whose links lead somewhere."""

from __future__ import annotations

import re

from tests.unit.docs.documented import ROOT

LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def _links(path):
    return [match.group(1) for match in LINK.finditer(path.read_text()) if "://" not in match.group(1)]


def test_the_map_fits_one_screen_and_names_every_page():
    page = ROOT / "docs" / "README.md"
    lines = page.read_text().splitlines()
    assert len(lines) <= 40, f"docs/README.md has {len(lines)} lines: one screen is 40"
    linked = {(page.parent / link).resolve() for link in _links(page)}
    pages = {path.resolve() for path in (ROOT / "docs").glob("*.md") if path.name != "README.md"}
    assert pages <= linked, f"pages the map does not name: {sorted(p.name for p in pages - linked)}"


def test_links_of_the_map_and_the_readme_lead_to_files():
    for page in (ROOT / "README.md", ROOT / "docs" / "README.md"):
        for link in _links(page):
            target = (page.parent / link).resolve()
            relative = str(target.relative_to(ROOT)) if target.is_relative_to(ROOT) else str(target)
            assert target.exists(), f"{page.name}: {link} ({relative}) does not exist"


def test_the_readme_opens_with_results_at_a_glance():
    text = (ROOT / "README.md").read_text()
    sections = re.findall(r"^## (.+)$", text, flags=re.M)
    assert sections[0] == "Results at a glance"
    table = text.split("## Results at a glance", 1)[1].split("\n## ", 1)[0]
    rows = [
        line for line in table.splitlines() if line.startswith("| ") and not line.startswith("| question")
    ]
    assert len(rows) >= 6
    assert any("not yet measured" in row for row in rows), "what is not measured yet is said"
    critic_pays = next(row for row in rows if row.startswith("| Does a critic pay here"))
    assert "(docs/study-critic-pays.md)" in critic_pays
    # The row quotes the study's generated numbers: TETHER - MEAN on final reward as the block says it.
    block = (ROOT / "docs" / "study-critic-pays.md").read_text()
    quoted = re.search(r"TETHER over a privileged critic − MEAN ([+−-]\d\.\d{3}) final reward", critic_pays)
    assert quoted is not None, critic_pays
    generated = re.search(r"\| tether-pvf-async vs mean \| final reward \| ([+-]\d\.\d{3}) \|", block)
    assert generated is not None and generated.group(1) == quoted.group(1).replace("−", "-"), (
        quoted,
        generated,
    )
    anchors = set(re.findall(r"\]\(#([^)]+)\)", table))
    headings = {
        re.sub(r"[^a-z0-9 -]", "", h.lower()).replace(" ", "-")
        for h in re.findall(r"^#+ (.+)$", text, flags=re.M)
    }
    assert anchors <= headings, anchors - headings
