"""The committed gRPC stubs must be exactly what `make proto` generates from protos/."""

import filecmp
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def test_committed_stubs_match_the_proto_files(tmp_path):
    protos = sorted(
        str(p.relative_to(ROOT / "protos")) for p in (ROOT / "protos" / "lecritique" / "v1").glob("*.proto")
    )
    subprocess.run(
        [
            sys.executable,
            "-m",
            "grpc_tools.protoc",
            "-Iprotos",
            f"--python_out={tmp_path}",
            f"--grpc_python_out={tmp_path}",
            f"--pyi_out={tmp_path}",
            *[f"protos/{p}" for p in protos],
        ],
        cwd=ROOT,
        check=True,
    )
    generated = sorted(p.name for p in (tmp_path / "lecritique" / "v1").iterdir())
    committed = sorted(
        p.name
        for p in (ROOT / "libs" / "lecritique" / "v1").iterdir()
        if p.name != "__init__.py" and p.suffix in (".py", ".pyi")
    )
    assert generated == committed, "run `make proto`: stub files differ from the .proto files"
    for name in generated:
        same = filecmp.cmp(
            tmp_path / "lecritique" / "v1" / name, ROOT / "libs" / "lecritique" / "v1" / name, shallow=False
        )
        assert same, f"libs/lecritique/v1/{name} is stale: run `make proto`"
