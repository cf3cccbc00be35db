"""The commands README.md and docs/*.md tell a person to type: every line of a ```bash block.

Each command is classified by a comment in the doc, so a command added without one is run:

* ``# needs: cluster|gpu|long|docker|api`` at the end of a line (or alone on the first line of a
  block, for the whole block), or ``<!-- doc-test: needs=KIND -->`` on the line before the block:
  not run here (a Kubernetes cluster, a GPU, minutes of CPU, Docker, an API serving somewhere);
  ``make demo``, ``make test`` and ``make study`` run in CI or by hand;
* ``<!-- doc-test: synopsis -->`` before a block: usage lines with placeholders (``SPEC.yaml``,
  ``DIR``, ``[--wait]``), not run;
* ``<!-- doc-test: local-api -->`` before a block: the Local mode sequence of docs/deployment.md,
  run by its own test against ``lecritique api serve --dev``;
* anything else: run as written.

Every ``lecritique`` command, run or not, must name a sub-command and options the CLI has.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
NEEDS = {"cluster", "gpu", "long", "docker", "api"}
_NEEDS_COMMENT = re.compile(r"#\s*needs:\s*([a-z]+)")
_MARKER = re.compile(r"<!--\s*doc-test:\s*(.*?)\s*-->")


@dataclass(frozen=True)
class Command:
    file: str
    line: int
    text: str
    """The command as typed (continuation lines joined), without its trailing comment."""
    kind: str
    """``run``, ``needs:KIND``, ``synopsis`` or ``local-api``."""
    comment: str = ""

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"


def doc_files() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def _split_comment(line: str) -> tuple[str, str]:
    """(command, comment): the first ``#`` outside quotes that starts a word begins the comment."""
    quote = ""
    for index, char in enumerate(line):
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (index == 0 or line[index - 1].isspace()):
            return line[:index].rstrip(), line[index:]
    return line.rstrip(), ""


def blocks(path: Path) -> list[tuple[int, str, list[tuple[int, str]]]]:
    """(line of the fence, marker before it, [(line, text), ...]) of each ```bash block."""
    found = []
    lines = path.read_text().splitlines()
    index = 0
    while index < len(lines):
        fence = lines[index].strip()
        if fence in ("```bash", "```sh", "```shell", "```console"):
            before = lines[index - 1].strip() if index else ""
            marker = _MARKER.fullmatch(before)
            body = []
            start = index + 1
            index += 1
            while index < len(lines) and lines[index].strip() != "```":
                body.append((index + 1, lines[index]))
                index += 1
            found.append((start, marker.group(1) if marker else "", body))
        index += 1
    return found


def commands(path: Path) -> list[Command]:
    out = []
    relative = str(path.relative_to(ROOT))
    for _, marker, body in blocks(path):
        block_kind = ""
        if marker.startswith("needs="):
            block_kind = "needs:" + marker.split("=", 1)[1].split()[0]
        elif marker in ("synopsis", "local-api"):
            block_kind = marker
        elif marker:
            raise ValueError(f"{relative}: unknown doc-test marker {marker!r}")
        pending: list[str] = []
        first_line = 0
        for number, raw in body:
            text, comment = _split_comment(raw)
            if not text.strip():
                needs_all = _NEEDS_COMMENT.search(comment)
                if (
                    needs_all and number == body[0][0] and not block_kind
                ):  # a block's first line: the whole block
                    block_kind = "needs:" + needs_all.group(1)
                continue
            if not pending:
                first_line = number
            pending.append(text.rstrip().removesuffix("\\").strip())
            if text.rstrip().endswith("\\"):
                continue
            needs = _NEEDS_COMMENT.search(comment)
            kind = block_kind or ("needs:" + needs.group(1) if needs else "run")
            if needs and block_kind:
                kind = "needs:" + needs.group(1)
            out.append(Command(relative, first_line, " ".join(pending), kind, comment))
            pending = []
    for command in out:
        if command.kind.startswith("needs:") and command.kind.split(":", 1)[1] not in NEEDS:
            raise ValueError(
                f"{command.where}: unknown 'needs' {command.kind!r} (known: {', '.join(sorted(NEEDS))})"
            )
    return out


def all_commands() -> list[Command]:
    return [command for path in doc_files() for command in commands(path)]


def lecritique_words(command: Command) -> list[str] | None:
    """The words after ``lecritique`` (at the start, or inside ``$(...)``) up to a pipe, a
    redirection or the closing parenthesis; None when the command is not a ``lecritique`` one."""
    match = re.match(r"(?:\w+=\$\()?lecritique\s+([^)>]*)", command.text)
    return shlex.split(match.group(1)) if match else None
