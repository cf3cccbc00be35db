"""Hugging Face's "Writing model shards" bars and "LOAD REPORT ... MISSING" tables are silenced
unless ``--verbose`` (issue 30): what every ``lecritique`` command does before its sub-command,
then a save and a load with a new head (a critic built on a policy backbone), in a fresh process."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helm_support import ROOT

SCRIPT = """
import sys
from lecritique.cli.main import main
main(verbose=sys.argv[2] == "verbose")  # the callback typer runs before every sub-command
import transformers
config = transformers.LlamaConfig(vocab_size=32, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                                  num_attention_heads=2, num_key_value_heads=2, num_labels=1, pad_token_id=0)
transformers.LlamaForCausalLM(config).save_pretrained(sys.argv[1])
transformers.LlamaForSequenceClassification.from_pretrained(sys.argv[1])
"""


def output(tmp_path: Path, mode: str) -> str:
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("TRANSFORMERS_", "HF_HUB_DISABLE", "LECRITIQUE_VERBOSE"))
    }
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "libs"), str(ROOT)])
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path / mode), mode],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout + done.stderr


@pytest.mark.slow(seconds=90)
def test_third_party_bars_and_load_reports_only_when_verbose(tmp_path: Path) -> None:
    quiet = output(tmp_path, "quiet")
    assert "Writing model shards" not in quiet and "LOAD REPORT" not in quiet, quiet
    loud = output(tmp_path, "verbose")  # the test can fail: these are what transformers prints by default
    assert "LOAD REPORT" in loud and "MISSING" in loud, loud
