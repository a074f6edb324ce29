"""Time the batch recipes of docs/batch.md on each engine against one process.

    python benchmarks/bench_engines.py                       # 100,000 conversations
    python benchmarks/bench_engines.py --count 10000 --engines loop,pool,dask

Builds a deterministic JSONL dataset of agent conversations, runs the page's
recipes as written (only the budget in ``jobs.py`` is set from ``--max-tokens``)
and prints, for each engine, the wall time of the job, the time to start the
engine where it has one (for Spark, with a first job on a 1,000-line sample
that warms the JVM and starts the Python workers), the throughput, the ratio to
the one-process loop, and whether the output is byte-identical to that of the
first engine run (the loop's, by default). Engines that are not
installed (or Spark without Java) are reported as skipped. Needs the ``engines``
extra for Spark, Dask and Ray; the exit status is 0 whatever the figures.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import json
import os
import random
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "batch.md"
ENGINES = ("loop", "pool", "spark", "spark_pandas", "dask", "ray")
Run = Optional[Tuple[float, float, List[Path]]]  # start time, job time, output files


def conversation(rng: random.Random) -> List[Dict[str, Any]]:
    """A system prompt, then turns of a question, 0-2 tool rounds and an answer."""
    messages: List[Dict[str, Any]] = [{"role": "system", "content": "You are a careful agent."}]
    for turn in range(rng.randint(1, 5)):
        messages.append({"role": "user", "content": f"step {turn}: " + "why " * rng.randint(3, 40)})
        for _ in range(rng.randint(0, 2)):
            ids = [f"call_{turn}_{k}" for k in range(rng.randint(1, 2))]
            messages.append(
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": i,
                            "type": "function",
                            "function": {"name": "search", "arguments": json.dumps({"q": i})},
                        }
                        for i in ids
                    ],
                }
            )
            for i in ids:
                rows = [{"n": n, "text": "résultat " * rng.randint(1, 6)} for n in range(3)]
                messages.append({"role": "tool", "tool_call_id": i, "content": json.dumps(rows)})
        messages.append({"role": "assistant", "content": "Done: " + "ok " * rng.randint(2, 30)})
    return messages


DISTINCT = 1000


def write_dataset(path: Path, count: int, seed: int) -> int:
    """``count`` lines cycling over ``DISTINCT`` conversations (building them is the slow part)."""
    rng = random.Random(seed)
    texts = [json.dumps(conversation(rng), ensure_ascii=False) for _ in range(min(count, DISTINCT))]
    with path.open("w", encoding="utf-8", newline="\n") as out:
        for n in range(count):
            text = texts[n % len(texts)]
            # Half bare arrays, half line objects with an id, as a dataset mixes them.
            out.write(f'{{"id": {n}, "messages": {text}}}\n' if n % 2 else text + "\n")
    return path.stat().st_size


def write_recipes(directory: Path, max_tokens: int) -> None:
    """The page's recipe files, with the job's budget set to ``max_tokens``."""
    page = PAGE.read_text(encoding="utf-8")
    for block in re.findall(r"```python\n(.*?)```", page, re.S):
        found = re.match(r"# (\w+\.py)\n", block)
        if not found:
            continue
        if found.group(1) == "jobs.py":
            budgeted = block.replace('"max_tokens": 8000', f'"max_tokens": {max_tokens}')
            assert budgeted != block, "jobs.py on the page no longer sets max_tokens to 8000"
            block = budgeted
        (directory / found.group(1)).write_text(block, encoding="utf-8")


def digest(files: List[Path]) -> Tuple[str, int]:
    sha = hashlib.sha256()
    size = 0
    for path in files:
        data = path.read_bytes()
        sha.update(data)
        size += len(data)
    return sha.hexdigest(), size


def run_loop(src: Path, out: Path, recipes: Path) -> Run:
    jobs = importlib.import_module("jobs")
    start = time.perf_counter()
    target = out / "loop.jsonl"
    with src.open(encoding="utf-8") as lines, target.open("w", encoding="utf-8", newline="\n") as f:
        f.writelines(line + "\n" for line in jobs.compact_lines(lines))
    return 0.0, time.perf_counter() - start, [target]


def run_pool(src: Path, out: Path, recipes: Path) -> Run:
    pool_job = importlib.import_module("pool_job")
    target = out / "pool.jsonl"
    start = time.perf_counter()
    pool_job.compact_with_pool(str(src), str(target), processes=2)
    return 0.0, time.perf_counter() - start, [target]


def run_spark(src: Path, out: Path, recipes: Path, *, pandas: bool = False) -> Run:
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        return None
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        return None
    os.environ["PYSPARK_PYTHON"] = os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    start = time.perf_counter()
    spark = (
        SparkSession.builder.master("local[2]")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.memory", "2g")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    spark.sparkContext.addPyFile(str(recipes / "jobs.py"))
    spark_job = importlib.import_module("spark_job")
    # The first job of a session pays for the JVM's warm-up and the Python
    # workers' start (about 40 s of a 50 s first run here); a job on a small
    # sample pays it before the clock starts, and is counted as start time.
    sample = out / "sample.jsonl"
    with src.open("rb") as lines:
        sample.write_bytes(b"".join(line for line, _ in zip(lines, range(1000))))
    warm = spark_job.compact_with_spark_pandas if pandas else spark_job.compact_with_spark
    warm(spark, str(sample), str(out / "sample"))
    started = time.perf_counter() - start
    target = out / "spark"
    start = time.perf_counter()
    if pandas:
        spark_job.compact_with_spark_pandas(spark, str(src), str(target))
    else:
        spark_job.compact_with_spark(spark, str(src), str(target))
    took = time.perf_counter() - start
    spark.stop()
    return started, took, sorted(p for p in target.glob("part-*") if not p.name.endswith(".crc"))


def run_spark_pandas(src: Path, out: Path, recipes: Path) -> Run:
    return run_spark(src, out, recipes, pandas=True)


def run_dask(src: Path, out: Path, recipes: Path) -> Run:
    try:
        import dask.bag  # noqa: F401
    except ImportError:
        return None
    dask_job = importlib.import_module("dask_job")
    target = out / "dask"
    start = time.perf_counter()
    # Blocks of 16 MiB: a few per core, so that both cores have work.
    dask_job.compact_with_dask(str(src), str(target), blocksize="16MiB")
    return 0.0, time.perf_counter() - start, sorted(target.glob("*.jsonl"))


def run_ray(src: Path, out: Path, recipes: Path) -> Run:
    try:
        import ray
        import ray.data
    except ImportError:
        return None
    start = time.perf_counter()
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        runtime_env={"env_vars": {"PYTHONPATH": str(recipes)}},
    )
    started = time.perf_counter() - start
    ray_job = importlib.import_module("ray_job")
    target = out / "ray.jsonl"
    start = time.perf_counter()
    ray_job.compact_with_ray(str(src), str(target))
    took = time.perf_counter() - start
    ray.shutdown()
    return started, took, [target]


RUNNERS: Dict[str, Callable[[Path, Path, Path], Run]] = {
    "loop": run_loop,
    "pool": run_pool,
    "spark": run_spark,
    "spark_pandas": run_spark_pandas,
    "dask": run_dask,
    "ray": run_ray,
}


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=100_000, help="conversations (100000)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-tokens", type=int, default=400, help="the job's budget (400)")
    parser.add_argument("--engines", default=",".join(ENGINES), help="comma-separated, in order")
    args = parser.parse_args(argv)
    engines = [name.strip() for name in args.engines.split(",") if name.strip()]
    unknown = sorted(set(engines) - set(ENGINES))
    if unknown:
        parser.error(f"unknown engines: {', '.join(unknown)}")

    with tempfile.TemporaryDirectory(prefix="bench-engines-") as tmp:
        work = Path(tmp)
        # The page's recipe files: importable here and, through --py-files or
        # PYTHONPATH, by the engines' workers.
        recipes = work / "recipes"
        recipes.mkdir()
        write_recipes(recipes, args.max_tokens)
        sys.path.insert(0, str(recipes))
        src = work / "conversations.jsonl"
        start = time.perf_counter()
        size = write_dataset(src, args.count, args.seed)
        print(
            f"dataset: {args.count:,} conversations, {size / 2**20:,.1f} MiB, "
            f"built in {time.perf_counter() - start:.1f} s; max_tokens={args.max_tokens}; "
            f"{os.cpu_count()} CPUs"
        )
        print(f"{'engine':<12} {'start s':>8} {'job s':>8} {'conv/s':>9} {'x loop':>7}  output")
        reference: Optional[Tuple[str, int]] = None
        loop_time: Optional[float] = None
        for name in engines:
            out = work / f"out-{name}"
            out.mkdir()
            done = RUNNERS[name](src, out, recipes)
            if done is None:
                print(f"{name:<12} skipped (not installed, or no Java for Spark)")
                continue
            started, took, files = done
            figures = digest(files)
            if reference is None:
                reference = figures
            if name == "loop":
                loop_time = took
            same = "identical" if figures == reference else "DIFFERENT"
            ratio = f"{loop_time / took:6.2f}x" if loop_time else "      -"
            print(
                f"{name:<12} {started:8.1f} {took:8.1f} {args.count / took:9,.0f} {ratio}  "
                f"{same}, {figures[1] / 2**20:,.1f} MiB in {len(files)} file(s)"
            )
            shutil.rmtree(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
