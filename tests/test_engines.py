"""The recipes of docs/batch.md, run as written on each engine.

Every recipe compacts the same small JSONL dataset, and its output must be
byte-identical to compacting each line with ``compact`` in this process. The
engines are the optional ``engines`` test extra: each test is skipped when its
engine is not installed (and the Spark tests when there is no Java runtime).
Sessions are started once per test run and the data is tiny, because starting
Spark or Ray is what these tests spend their time on.
"""

from __future__ import annotations

import importlib
import json
import os
import random
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any, Dict, Iterator, List

import pytest
from helpers import calling, system, tool, user

import ctx_compact
from ctx_compact import compact

ROOT = Path(__file__).resolve().parent.parent
PAGE = (ROOT / "docs" / "batch.md").read_text(encoding="utf-8")
BLOCKS = re.findall(r"```python\n(.*?)```", PAGE, re.S)
# A recipe block starts with "# name.py": it is that file of the user's job.
RECIPES = {
    block.split("\n", 1)[0][2:]: block for block in BLOCKS if re.match(r"# \w+\.py\n", block)
}
EXAMPLES = [block for block in BLOCKS if not re.match(r"# \w+\.py\n", block)]


# --- the dataset and what compact makes of it ------------------------------------------


def conversation(rng: random.Random, turns: int) -> List[Dict[str, Any]]:
    # Text the JSON writer leaves raw (ensure_ascii=False): accents, CJK, an
    # astral emoji, and U+2028, which str.splitlines() would take for a line end.
    messages = [system("Be careful. café, 日本語, 🎉")]
    for turn in range(turns):
        messages.append(user(f"turn {turn}\u2028" + "words " * rng.randint(5, 300)))
        for _ in range(rng.randint(0, 2)):
            ids = [f"call_{turn}_{k}_{rng.random():.6f}" for k in range(rng.randint(1, 3))]
            messages.append(calling(*ids))
            messages.extend(tool(i, "row\n" * rng.randint(20, 900)) for i in ids)
        messages.append({"role": "assistant", "content": f"done {turn}"})
    return messages


def dataset_lines(count: int = 24, seed: int = 11) -> List[str]:
    """JSONL lines: bare arrays and line objects with other keys, and some blank lines."""
    rng = random.Random(seed)
    lines = []
    for n in range(count):
        messages = conversation(rng, rng.randint(1, 12))
        value: Any = messages if n % 3 == 0 else {"id": n, "messages": messages, "split": "train"}
        lines.append(json.dumps(value, ensure_ascii=False) + "\n")
        if n % 7 == 3:
            lines.append("\n")
    return lines


def compacted_in_process(lines: List[str], options: Dict[str, Any]) -> bytes:
    """The reference: ``compact`` on each line, written as the recipes write."""
    out = []
    for line in lines:
        if not line.strip():
            continue
        value = json.loads(line)
        if isinstance(value, dict):
            value = dict(value, messages=compact(value["messages"], **options).messages)
        else:
            value = compact(value, **options).messages
        out.append(json.dumps(value, ensure_ascii=False, separators=(",", ":")) + "\n")
    return "".join(out).encode("utf-8")


@pytest.fixture(scope="session")
def recipes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The page's recipe files written to a directory importable here and in spawned workers."""
    directory = tmp_path_factory.mktemp("recipes")
    for name, code in RECIPES.items():
        (directory / name).write_text(code, encoding="utf-8")
    sys.path.insert(0, str(directory))
    yield directory
    sys.path.remove(str(directory))
    for name in RECIPES:
        sys.modules.pop(name[:-3], None)


@pytest.fixture(scope="session")
def dataset(tmp_path_factory: pytest.TempPathFactory, recipes: Path) -> Path:
    path = tmp_path_factory.mktemp("data") / "conversations.jsonl"
    path.write_bytes("".join(dataset_lines()).encode("utf-8"))
    return path


@pytest.fixture(scope="session")
def expected(dataset: Path) -> bytes:
    jobs = importlib.import_module("jobs")
    # Not splitlines(), which would cut at U+2028: "\n" only ends a JSONL line.
    lines = [line + "\n" for line in dataset.read_text(encoding="utf-8").split("\n")]
    reference = compacted_in_process(lines, jobs.OPTIONS)
    original = compacted_in_process(lines, {"max_tokens": 10**12})
    # The data is big enough for the recipe's budget to drop something.
    assert len(reference) < len(original)
    return reference


def concatenated(files: List[Path]) -> bytes:
    return b"".join(path.read_bytes() for path in files)


# --- the page itself -------------------------------------------------------------------


def test_the_page_holds_every_recipe() -> None:
    assert set(RECIPES) == {"jobs.py", "pool_job.py", "spark_job.py", "dask_job.py", "ray_job.py"}


@pytest.mark.parametrize("index", range(len(EXAMPLES)))
def test_the_page_examples_print_what_they_say(index: int, tmp_path: Path) -> None:
    code = EXAMPLES[index]
    said = [line[2:] for line in code.splitlines() if line.startswith("# ")]
    script = tmp_path / "example.py"
    script.write_text(code, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == said


def test_the_job_module_in_process(dataset: Path, expected: bytes) -> None:
    jobs = importlib.import_module("jobs")
    with dataset.open(encoding="utf-8") as lines:
        out = "".join(line + "\n" for line in jobs.compact_lines(lines))
    assert out.encode("utf-8") == expected


def test_a_zip_of_the_package_imports_and_compacts(tmp_path: Path) -> None:
    package = Path(ctx_compact.__file__).parent
    archive = tmp_path / "ctx_compact.zip"
    with zipfile.ZipFile(archive, "w") as zipped:
        for path in sorted(package.rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                zipped.write(path, path.relative_to(package.parent).as_posix())
    probe = (
        "import sys, json, zipimport\n"
        f"sys.path.insert(0, {str(archive)!r})\n"
        "import ctx_compact\n"
        "from ctx_compact import compact, compact_many\n"
        "assert isinstance(ctx_compact.__loader__, zipimport.zipimporter), ctx_compact.__loader__\n"
        "messages = [{'role': 'system', 'content': 's'}]\n"
        "messages += [{'role': 'user', 'content': 'u' * 400} for _ in range(9)]\n"
        "(done,) = compact_many([{'id': 1, 'messages': messages}], max_tokens=300)\n"
        "assert done.messages == compact(messages, max_tokens=300).messages\n"
        "print(json.dumps([ctx_compact.__file__, done.indices.dropped_count]))\n"
    )
    # -I -S: no site-packages, no environment, no current directory: only the zip.
    done = subprocess.run(
        [sys.executable, "-I", "-S", "-c", probe],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    where, dropped = json.loads(done.stdout)
    assert where.startswith(str(archive))
    assert dropped == 5


# --- multiprocessing -------------------------------------------------------------------


def test_multiprocessing_pool(dataset: Path, expected: bytes, tmp_path: Path) -> None:
    pool_job = importlib.import_module("pool_job")
    out = tmp_path / "compacted.jsonl"
    # Small blocks, so that several workers share the work and order matters.
    pool_job.compact_with_pool(str(dataset), str(out), processes=2, block_size=4)
    assert out.read_bytes() == expected


def test_multiprocessing_pool_bounded(dataset: Path, expected: bytes, tmp_path: Path) -> None:
    pool_job = importlib.import_module("pool_job")
    out = tmp_path / "compacted.jsonl"
    pool_job.compact_with_pool_bounded(str(dataset), str(out), processes=2, block_size=2)
    assert out.read_bytes() == expected


# --- Spark -----------------------------------------------------------------------------


@pytest.fixture(scope="session")
def spark(recipes: Path) -> Iterator[Any]:
    pytest.importorskip("pyspark")
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("Spark needs a Java runtime (java on PATH or JAVA_HOME)")
    from pyspark.sql import SparkSession

    saved = {name: os.environ.get(name) for name in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")}
    # The workers run this interpreter, which has ctx_compact installed.
    os.environ["PYSPARK_PYTHON"] = os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    session = (
        SparkSession.builder.master("local[2]")
        .appName("ctx-compact-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.files.maxPartitionBytes", str(256 * 1024))  # a few partitions
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    session.sparkContext.addPyFile(str(recipes / "jobs.py"))  # as --py-files would
    yield session
    session.stop()
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


def part_files(directory: Path) -> List[Path]:
    return sorted(path for path in directory.glob("part-*") if not path.name.endswith(".crc"))


def test_spark_map_partitions(spark: Any, dataset: Path, expected: bytes, tmp_path: Path) -> None:
    spark_job = importlib.import_module("spark_job")
    out = tmp_path / "compacted"
    spark_job.compact_with_spark(spark, str(dataset), str(out))
    parts = part_files(out)
    assert len(parts) > 1
    assert concatenated(parts) == expected


@pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas:FutureWarning")
def test_spark_map_in_pandas(spark: Any, dataset: Path, expected: bytes, tmp_path: Path) -> None:
    pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    spark_job = importlib.import_module("spark_job")
    out = tmp_path / "compacted"
    spark_job.compact_with_spark_pandas(spark, str(dataset), str(out))
    parts = part_files(out)
    assert len(parts) > 1
    assert concatenated(parts) == expected


# --- Dask ------------------------------------------------------------------------------


def test_dask_bag(dataset: Path, expected: bytes, tmp_path: Path) -> None:
    pytest.importorskip("dask.bag")
    dask_job = importlib.import_module("dask_job")
    out = tmp_path / "compacted"
    # Blocks just over the longest line: many partitions, none without a line
    # start (which to_textfiles would write as a lone newline, as the page says).
    longest = max(len(line) for line in dataset.read_bytes().split(b"\n"))
    dask_job.compact_with_dask(str(dataset), str(out), blocksize=longest + 1)
    files = sorted(out.glob("*.jsonl"))
    assert len(files) > 1
    assert concatenated(files) == expected


# --- Ray -------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def ray_runtime(recipes: Path) -> Iterator[Any]:
    ray = pytest.importorskip("ray")
    pytest.importorskip("ray.data")
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        runtime_env={"env_vars": {"PYTHONPATH": str(recipes)}},
    )
    yield ray
    ray.shutdown()


# Ray's own DataContext.get_current() sets deprecated fields of its own.
@pytest.mark.filterwarnings("ignore::DeprecationWarning:ray.data.context")
def test_ray_data(ray_runtime: Any, dataset: Path, expected: bytes, tmp_path: Path) -> None:
    ray_job = importlib.import_module("ray_job")
    out = tmp_path / "compacted.jsonl"
    ray_job.compact_with_ray(str(dataset), str(out))
    assert out.read_bytes() == expected
