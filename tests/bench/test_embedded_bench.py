"""`bench/embedded.py` measures what the service serves: the served model from the service's model cache,
each question in the option orders the service asks it in, and the question mix docs/benchmarks.md names."""

from __future__ import annotations

from bench.embedded import arguments, question_mix, question_orders, questions_build
from inference.gguf import BUNDLED, DEFAULT_SOURCE
from inference.prompts import Budget, plan_compile
from inference.requests import conversation_of_text
from inference.tuning import tuning_for
from serving.config_reading import config_from_env
from testbed.qwen3 import qwen3_labels, qwen3_tokenizer


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


def test_the_plan_it_times_asks_each_question_in_its_served_orders() -> None:
    served = BUNDLED[DEFAULT_SOURCE].served_name

    def branches(orders: str) -> int:
        plan = plan_compile(
            conversation=conversation_of_text(text="A support transcript."),
            questions=questions_build(count=64),
            tokenizer=qwen3_tokenizer(),
            labels=qwen3_labels(),
            budget=Budget(max_input_tokens=8192, max_total_input_tokens=1 << 20),
            permutations=question_orders(model=served, orders=orders),
        )
        return len(plan.branches)

    assert branches("served") == 96 and branches("1") == 64
