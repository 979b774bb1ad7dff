"""GET endpoints: models, limits, health."""

from __future__ import annotations

from serving.evaluator import evaluator_install


async def test_models_lists_the_alias_first_then_the_public_id(api, settings):
    body = (await api.get("/v1/models")).json()
    config = settings.OPENJEV
    assert [m["name"] for m in body["models"]] == [config.model_alias, config.model]
    assert all(set(m) == {"name", "description", "release_date"} for m in body["models"])
    assert body["object"] == "list"
    assert [d["id"] for d in body["data"]] == [config.model_alias, config.model]
    assert all(d["object"] == "model" and d["owned_by"] for d in body["data"])


async def test_limits_lists_every_admission_limit(api):
    body = (await api.get("/v1/limits")).json()
    assert body == {
        "max_questions": 64,
        "max_answers_per_question": 255,
        "max_body_bytes": 2097152,
        "max_images": 0,
        "max_image_bytes": 1048576,
        "max_input_tokens": 32768,
        "max_total_input_tokens": 262144,
        "max_concurrent_requests": 32,
        "max_concurrent_branches": 64,
        "request_timeout_seconds": 120.0,
        "decisions": {"max_questions": 400, "max_choices": 255, "max_levels": 10, "max_images": 0},
        "google": {"max_questions": 400, "max_choices": 255, "max_levels": 255, "max_images": 0},
    }


async def test_health_is_ok_when_the_backend_answers(api, fake):
    response = await api.get("/health")
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "ok" and body["backend"] == "sglang" and "startup_seconds" in body


async def test_health_is_503_when_the_backend_is_down_and_live_stays_200(api, fake):
    fake.healthy = False
    response = await api.get("/health")
    assert response.status_code == 503 and response.json()["status"] == "unavailable"
    assert response.headers["retry-after"]
    assert (await api.get("/health/live")).status_code == 200


async def test_health_needs_no_key_when_auth_is_on_and_names_model_and_worker_only_to_a_key(api, fake, settings):
    from dataclasses import replace

    settings.OPENJEV = replace(settings.OPENJEV, api_key="k")
    anonymous = await api.get("/health")
    assert anonymous.status_code == 200 and set(anonymous.json()) == {"status", "backend", "startup_seconds"}
    wrong = await api.get("/health", headers={"Authorization": "Bearer nope"})
    assert wrong.status_code == 200 and "model" not in wrong.json()
    keyed = (await api.get("/health", headers={"Authorization": "Bearer k"})).json()
    assert keyed["model"] == "Qwen/Qwen3.6-35B-A3B" and isinstance(keyed["worker_pid"], int)
    assert keyed["workers"] == {"up": 1, "configured": 1, "replaced": 0}  # one process, no pool
    assert (await api.get("/health/live")).status_code == 200


async def test_health_reports_the_workers_as_serves_pool_last_wrote_them(api, fake, tmp_path, monkeypatch):
    from serving.workers import WORKERS_STATE_ENV, WorkersState, workers_state_write

    state = tmp_path / "state.json"
    monkeypatch.setenv(WORKERS_STATE_ENV, str(state))
    workers_state_write(path=state, state=WorkersState(up=1, configured=2, replaced=1))
    body = (await api.get("/health")).json()
    assert body["status"] == "ok" and body["workers"] == {"up": 1, "configured": 2, "replaced": 1}
    state.unlink()  # the pool is stopping: the count is unknown, the answer still ready
    body = (await api.get("/health")).json()
    assert body["status"] == "ok" and "workers" not in body


async def test_the_openapi_document_shows_the_default_limits_not_this_deployments_when_auth_is_on(api, settings):
    from dataclasses import replace

    from api.openapi.document import schema_document, schema_render

    def max_questions() -> int:
        schema_document.cache_clear()
        schema_render.cache_clear()
        document = schema_document()
        return int(document["components"]["schemas"]["SystemOneRequest"]["properties"]["questions"]["maxProperties"])

    try:
        settings.OPENJEV = replace(settings.OPENJEV, max_questions=7)
        assert max_questions() == 7
        settings.OPENJEV = replace(settings.OPENJEV, max_questions=7, api_key="k")
        assert max_questions() == 64
    finally:
        schema_document.cache_clear()
        schema_render.cache_clear()


async def test_a_failed_engine_startup_is_reported_by_health_and_requests_and_logged_with_its_reason(
    api, fake, monkeypatch, caplog
):
    from inference.errors import StartupError
    from serving import evaluator as evaluator_module
    from serving.evaluator import STARTUP_FAILED

    def broken(*, config, backend=None):
        raise StartupError("no such model file")

    evaluator_install(None)
    monkeypatch.setattr(evaluator_module, "evaluator_build", broken)
    evaluator_module.evaluator_start()
    building = evaluator_module._slot.thread
    assert building is not None
    building.join()
    health = await api.get("/health")
    assert health.status_code == 503 and health.json()["message"] == STARTUP_FAILED  # open to anyone: no reason
    assert "no such model file" in caplog.text
    from tests.conftest import README_REQUEST

    response = await api.post("/v1/systemone", json=README_REQUEST)
    assert response.status_code == 503
    assert response.json()["detail"]["error_type"] == "backend_unavailable"


def test_api_paths_are_recognised_under_a_root_path_or_forced_script_name():
    from openjev_site.api_handler import path_is_api

    assert path_is_api({"path": "/v1/systemone"})
    assert path_is_api({"path": "/jev/v1/systemone", "root_path": "/jev"})
    assert path_is_api({"path": "/jev/health"}, script_name="/jev/")
    assert not path_is_api({"path": "/admin/"})
    assert not path_is_api({"path": "/jev/admin/"}, script_name="/jev")


def test_question_budget_is_clamped_to_a_backend_context(fake, settings):
    from inference.backends.sglang import SGLangBackend
    from serving.evaluator import evaluator_build
    from testbed.evaluators import fake_evaluator

    backend = fake_evaluator(fake).backend
    assert isinstance(backend, SGLangBackend)
    backend.context_tokens = 4096
    assert evaluator_build(config=settings.OPENJEV, backend=backend).budget.max_input_tokens == 4096


async def test_limits_report_the_question_budget_as_enforced_where_the_backends_context_is_smaller(api, fake):
    from testbed.evaluators import fake_evaluator

    evaluator_install(fake_evaluator(fake, max_input_tokens=4096))
    assert (await api.get("/v1/limits")).json()["max_input_tokens"] == 4096


def test_the_openai_sdk_retrieves_a_listed_model_and_gets_not_found_for_another(asgi_server):
    import openai

    client = openai.OpenAI(base_url=asgi_server.url + "/v1", api_key="unused", max_retries=0)
    model = client.models.retrieve("jev-latest")
    assert (model.id, model.object, model.owned_by) == ("jev-latest", "model", "openjev") and model.created > 0
    try:
        client.models.retrieve("gpt-6-luna")
    except openai.NotFoundError:
        pass
    else:
        raise AssertionError("a model that is not listed was found")
