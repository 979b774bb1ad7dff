"""`image_data` as SGLang takes it with input ids: one image per placeholder, in order, or a 400."""

from __future__ import annotations

import pytest

from tests.fake_sglang.helpers import PREFIX, batch_body, body, error_message

START, PAD, END = 151652, 151655, 151653
PLACEHOLDER = [START, PAD, END]
IMAGE = "data:image/png;base64,iVBORw0KGgo="


@pytest.mark.parametrize("placeholders, images", [(1, 0 + 2), (2, 1), (0, 1)])
def test_placeholders_and_images_that_disagree_are_refused(client, placeholders, images):
    ids = [*PREFIX, *PLACEHOLDER * placeholders, 7]
    response = client.post("/generate", json=body(ids, [1], image_data=[IMAGE] * images))
    assert response.status_code == 400
    assert "Mismatch" in error_message(response)


def test_each_placeholder_expands_to_the_images_tokens_and_prompt_tokens_count_them(client, fake):
    ids = [*PREFIX, *PLACEHOLDER, 7, *PLACEHOLDER]
    response = client.post("/generate", json=body(ids, [1], image_data=[IMAGE, "https://example.com/a.png"]))
    assert response.status_code == 200, response.text
    assert response.json()["meta_info"]["prompt_tokens"] == len(ids) + 2 * (fake.image_tokens - 1)


def test_without_image_data_the_markers_are_plain_text(client):
    response = client.post("/generate", json=body([*PREFIX, *PLACEHOLDER], [1]))
    assert response.status_code == 200
    assert response.json()["meta_info"]["prompt_tokens"] == len(PREFIX) + 3


def test_a_batch_takes_one_image_list_per_item_and_its_length_must_match(client):
    prompts = [[*PREFIX, *PLACEHOLDER, 5], [*PREFIX, 6]]
    ok = client.post("/generate", json={**batch_body(prompts, [[1], [1]], ["a", "b"]), "image_data": [[IMAGE], None]})
    assert ok.status_code == 200, ok.text
    short = client.post("/generate", json={**batch_body(prompts, [[1], [1]], ["c", "d"]), "image_data": [[IMAGE]]})
    assert short.status_code == 400 and "batch size" in error_message(short)


@pytest.mark.parametrize("image", ["data:image/png;base64,%%%", "/etc/passwd", 5])
def test_images_it_could_not_load_are_refused(client, image):
    response = client.post("/generate", json=body([*PREFIX, *PLACEHOLDER], [1], image_data=[image]))
    assert response.status_code == 400


def test_a_text_only_server_refuses_image_data(client, fake):
    fake.vision = None  # a control: the next reset restores it
    response = client.post("/generate", json=body([*PREFIX, *PLACEHOLDER], [1], image_data=[IMAGE]))
    assert response.status_code == 400 and "not multimodal" in error_message(response)
