"""`bench/embedded.py` measures what the service serves: the served model from the service's model cache,
each question in the option orders the service asks it in, and the question mix docs/benchmarks.md names."""

from __future__ import annotations

from bench.embedded import arguments, question_mix, questions_build
from inference.gguf import BUNDLED, DEFAULT_SOURCE
from inference.tuning import tuning_for
from serving.config import config_from_env


def test_by_default_it_loads_the_served_model_from_the_services_cache() -> None:
    args = arguments([])
    assert args.source == config_from_env().local_model
    assert args.cache_dir == config_from_env().model_cache  # not a second 1.1 GB copy elsewhere
    assert args.orders == "served"


def test_the_question_mix_is_three_yes_no_questions_to_one_four_option_choice() -> None:
    questions = questions_build(count=64)
    assert [q.type for q in questions[:4]] == ["noul", "noul", "noul", "choice"]
    assert sum(q.type == "choice" for q in questions) == 16
    assert {len(q.options) for q in questions if q.type == "choice"} == {4}


def test_the_served_default_asks_each_choice_in_three_orders_and_the_mix_says_so() -> None:
    tuning = tuning_for(model=BUNDLED[DEFAULT_SOURCE].served_name)
    served = question_mix(count=64, orders=lambda q: tuning.of(q).permutations)
    assert served == ("64: 48 yes/no + 16 four-option choice (noul in 1 order, choice in 3 orders; 96 branches)")
    assert question_mix(count=1, orders=lambda q: 1) == "1: 1 yes/no (noul in 1 order; 1 branch)"
