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


def test_each_item_of_a_batch_gets_its_own_images_and_the_server_records_them(client, fake):
    prompts = [[*PREFIX, 5], [*PREFIX, *PLACEHOLDER, 6], [*PREFIX, 7]]
    image_data = [[], [IMAGE], [None]]
    response = client.post(
        "/generate", json={**batch_body(prompts, [[1]] * 3, ["b_0", "b_1", "b_2"]), "image_data": image_data}
    )
    assert response.status_code == 200, response.text
    assert fake.item_images == [("b_0", []), ("b_1", [IMAGE]), ("b_2", [])]
    tokens = [item["meta_info"]["prompt_tokens"] for item in response.json()]
    assert tokens == [len(PREFIX) + 1, len(PREFIX) + 4 + fake.image_tokens - 1, len(PREFIX) + 1]


def test_a_batch_whose_first_entry_is_not_a_list_reads_each_entry_as_one_image(client, fake):
    """SGLang tells a list of image lists from a list of single images by `image_data[0]` alone."""
    prompts = [[*PREFIX, 5], [*PREFIX, *PLACEHOLDER, 6]]
    single = client.post(
        "/generate", json={**batch_body(prompts, [[1], [1]], ["s_0", "s_1"]), "image_data": [None, IMAGE]}
    )
    assert single.status_code == 200, single.text
    assert fake.item_images == [("s_0", []), ("s_1", [IMAGE])]
    nested = client.post(
        "/generate", json={**batch_body(prompts, [[1], [1]], ["n_0", "n_1"]), "image_data": [None, [IMAGE]]}
    )
    assert nested.status_code == 400 and "image_data[1]" in error_message(nested)
