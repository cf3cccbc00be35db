"""Which reasoning-gym scorers execute the answer: run as a script in a fresh interpreter.

``python tests/integration/envs/reasoning_gym_probe.py DIRECTORY`` feeds every registered dataset answers
that would run as code if the scorer evaluated them, and prints one JSON object: dataset name ->
the evidence that it did (empty lists are left out). Evidence, from a Python audit hook installed
before any dataset is scored:

- ``compile``: a ``compile`` event (``eval``/``exec``/``compile`` of a string, sympy's
  ``parse_expr``) whose source contains the payloads' marker;
- ``exec``: an ``exec`` event of a code object naming the marker;
- ``open``: a file opened whose path holds the marker;
- ``file``: a marker file exists in DIRECTORY after the dataset's answers were scored.

A separate interpreter because the payloads are real: an executing scorer does write the file.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

MARKER = "lecritique_probe_marker"


def payloads(path: str) -> list[str]:
    """Answers that run if evaluated: a call, a list, spaced, no spaces, an import, a bare name."""
    write = f"open({path!r},'w').write('x')"
    return [
        write,
        f"[{write}]",
        f"[[{write}]]",
        f"open( {path!r} , 'w' ).write( 'x' )",
        f"__import__('os').system('touch {path}')",
        f"__import__('pathlib').Path({path!r}).write_text('x')",
        f"1+len(str({write}))",
        f"({MARKER})",
        MARKER,
        f"{MARKER}(1)",
    ]


def _names_marker(code: Any) -> bool:
    constants = getattr(code, "co_consts", ())
    if any(isinstance(c, str) and MARKER in c for c in constants):
        return True
    if any(MARKER in name for name in getattr(code, "co_names", ())):
        return True
    return any(hasattr(c, "co_consts") and _names_marker(c) for c in constants)


def main(directory: str) -> None:
    from reasoning_gym.factory import DATASETS, create_dataset

    evidence: dict[str, set[str]] = {}
    scoring: list[str] = []

    def hook(event: str, args: tuple[Any, ...]) -> None:
        if not scoring:
            return
        found = ""
        if event == "compile" and args:
            source = args[0].decode(errors="replace") if isinstance(args[0], bytes) else args[0]
            found = "compile" if isinstance(source, str) and MARKER in source else ""
        elif event == "exec" and args:
            found = "exec" if _names_marker(args[0]) else ""
        elif event == "open" and args and isinstance(args[0], str | bytes):
            found = "open" if MARKER in os.fsdecode(args[0]) else ""
        if found:
            evidence.setdefault(scoring[-1], set()).add(found)

    sys.addaudithook(hook)
    path = os.path.join(directory, MARKER)
    for name in sorted(n for n in DATASETS if n != "composite"):
        dataset = create_dataset(name, seed=1, size=4)
        for entry in (dataset[0], dataset[1]):
            reference = entry.get("answer")
            answers = payloads(path)
            if isinstance(reference, str):
                answers += [
                    f"{reference}+{answers[0]}",
                    f"{reference}\n{answers[0]}",
                    f"{reference} {answers[1]}",
                ]
            for answer in answers:
                scoring.append(name)
                try:
                    dataset.score_answer(answer, entry)
                except Exception:
                    pass
                finally:
                    scoring.pop()
        if os.path.exists(path):
            evidence.setdefault(name, set()).add("file")
            os.remove(path)
    # A leading newline: some generators print progress dots without one.
    print("\n" + json.dumps({name: sorted(found) for name, found in sorted(evidence.items())}))


if __name__ == "__main__":
    main(sys.argv[1])
