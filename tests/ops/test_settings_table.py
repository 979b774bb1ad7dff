"""The settings table (docs/settings.md, moved there from the README) against the settings module: one row per
`OPENJEV_*` setting, its default as the code has it, and a meaning that names every value a choice accepts.

The table stays written by hand (its meanings link the docs and name statuses, more than a field's
docstring says); this test is what keeps it true. `serving/config.py` is the one source: a field's static
default is rendered here as a value the variable accepts, and a default that `config_from_env` derives, or
that unset means, is the field's `default_text`. A new setting without a row fails with the row to add.
"""

from __future__ import annotations

import ast
import itertools
import re
from dataclasses import MISSING, Field, fields
from pathlib import Path

from serving.config import BASE_DIR, OpenJevConfig
from serving.setting_rules import SettingRule

README = BASE_DIR / "README.md"
TABLE_PAGE = "docs/settings.md"
"""Where the settings table lives; every failure names it, so whoever adds a setting knows where its row goes."""
TABLE = BASE_DIR / TABLE_PAGE
CHECKOUT = "<checkout>"
"""How a default inside the checkout is written (the page cannot know where the checkout is cloned)."""
ROW = re.compile(r"^\| `(OPENJEV_[A-Z0-9_]+)` \| (.*?) \| (.*) \|$")
CHOICES = re.compile(r"(?:one of )?([\w.-]+(?:, [\w.-]+)*(?: or [\w.-]+)?)")
"""A rule that lists the accepted values: `a or b`, `a, b or c`, `one of a, b, c`."""
BOOLEAN_WORDS = ("true", "false", "on", "off")


def _rule(spec: Field) -> SettingRule:
    rule = spec.metadata["setting"]
    assert isinstance(rule, SettingRule), spec.name
    return rule


def variable(spec: Field) -> str:
    return f"OPENJEV_{spec.name.upper()}"


def value_text(spec: Field, value: object) -> str:
    """`value` as the variable would be set to it (for a boolean, the first word its parser reads as it)."""
    if isinstance(value, bool):
        for word in BOOLEAN_WORDS:
            try:
                if _rule(spec).parse(word) is value:
                    return word
            except ValueError:
                continue
        raise AssertionError(f"{variable(spec)}: no word among {BOOLEAN_WORDS} reads as {value}")
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, tuple):
        return ",".join(str(v) for v in value)
    return str(value).replace(str(BASE_DIR), CHECKOUT)


def default_cell(spec: Field) -> str:
    """The default column as the settings table must state it."""
    rule = _rule(spec)
    if rule.default_text:
        return rule.default_text
    if spec.default is MISSING:
        raise AssertionError(
            f"{variable(spec)} has no static default (config_from_env derives it): give its field a "
            "`default_text` in serving/config.py saying how it is derived"
        )
    if spec.default is None:
        return "—"
    return f"`{value_text(spec, spec.default)}`"


def accepted_values(spec: Field) -> list[str]:
    """The values a choice setting accepts, read from its rule (empty for any other setting)."""
    matched = CHOICES.fullmatch(_rule(spec).rule)
    return re.split(r", | or ", matched.group(1)) if matched else []


def docstrings() -> dict[str, str]:
    """Each field's docstring (the string after it in the class body), for the row a missing one should get."""
    tree = ast.parse(Path(BASE_DIR / "serving" / "config.py").read_text(encoding="utf-8"))
    body = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == OpenJevConfig.__name__).body
    found = {}
    for node, after in itertools.pairwise(body):
        if (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and isinstance(after, ast.Expr)
            and isinstance(after.value, ast.Constant)
            and isinstance(after.value.value, str)
        ):
            found[node.target.id] = " ".join(after.value.value.split())
    return found


def row_suggested(spec: Field) -> str:
    meaning = docstrings().get(spec.name) or _rule(spec).rule or "what it does"
    values = accepted_values(spec)
    if values:
        meaning += f" ({', '.join(f'`{v}`' for v in values)})"
    return f"| `{variable(spec)}` | {default_cell(spec)} | {meaning} |"


def table_rows(text: str) -> dict[str, list[tuple[str, str]]]:
    """Variable → every (default, meaning) the settings table gives it."""
    rows: dict[str, list[tuple[str, str]]] = {}
    for line in text.splitlines():
        if matched := ROW.match(line):
            rows.setdefault(matched.group(1), []).append((matched.group(2), matched.group(3)))
    return rows


SETTINGS = fields(OpenJevConfig)


def table_problems(text: str) -> list[str]:
    """Where the settings table in `text` disagrees with the settings module, one line each."""
    rows = table_rows(text)
    problems = []
    for spec in SETTINGS:
        name, found = variable(spec), rows.get(variable(spec), [])
        if not found:
            problems.append(f"{TABLE_PAGE}'s settings table has no row for {name}; add one:\n{row_suggested(spec)}")
            continue
        if len(found) > 1:
            problems.append(f"{TABLE_PAGE} has {len(found)} rows for {name}: keep one")
        default, meaning = found[0]
        if default != default_cell(spec):
            problems.append(
                f"{TABLE_PAGE} states {name}'s default as {default!r}; the code's is {default_cell(spec)!r}"
            )
        if not meaning.strip():
            problems.append(f"{TABLE_PAGE}'s row for {name} says nothing of what it means")
        missing = [v for v in accepted_values(spec) if f"`{v}`" not in meaning]
        if missing:
            problems.append(f"{TABLE_PAGE}'s row for {name} does not name the accepted value(s) {', '.join(missing)}")
    known = {variable(spec) for spec in SETTINGS}
    problems += [
        f"{TABLE_PAGE}'s settings table has a row for {name}, which serving/config.py does not read: remove it"
        for name in sorted(set(rows) - known)
    ]
    return problems


def _table() -> str:
    return TABLE.read_text(encoding="utf-8")


def _problems_added(text: str) -> list[str]:
    """The problems `text` has that the page itself has not: a rule is checked on its own, whatever a setting
    added meanwhile (and not yet given its row) makes the page's own check report."""
    existing = table_problems(_table())
    return [p for p in table_problems(text) if p not in existing]


def _row_of(text: str, name: str) -> str:
    return next(line for line in text.splitlines() if line.startswith(f"| `{name}` |"))


def _spec(name: str) -> Field:
    return next(s for s in SETTINGS if s.name == name)


def test_the_settings_table_agrees_with_the_settings_module() -> None:
    problems = table_problems(_table())
    assert not problems, f"{TABLE_PAGE} (the settings reference) is out of date:\n" + "\n".join(problems)


def test_a_setting_without_a_row_fails_naming_the_row_to_add() -> None:
    text = _table().replace(_row_of(_table(), "OPENJEV_BRANCH_MODE") + "\n", "")
    assert _problems_added(text) == [
        "docs/settings.md's settings table has no row for OPENJEV_BRANCH_MODE; add one:\n"
        "| `OPENJEV_BRANCH_MODE` | `batched` | batched or parallel (`batched`, `parallel`) |"
    ]


def test_a_derived_default_is_suggested_as_its_fields_default_text() -> None:
    assert row_suggested(_spec("backend")) == (
        "| `OPENJEV_BACKEND` | `local`, or `sglang` when `OPENJEV_BACKEND_URL` is set | "
        "`sglang` when OPENJEV_BACKEND_URL is set, else `local`. (`local`, `sglang`) |"
    )


def test_a_row_whose_default_drifted_from_the_code_fails() -> None:
    row = _row_of(_table(), "OPENJEV_LOCAL_MODEL")
    text = _table().replace(row, row.replace("`qwen2.5-coder-1.5b`", "`qwen2.5-coder-0.5b`", 1))
    assert _problems_added(text) == [
        "docs/settings.md states OPENJEV_LOCAL_MODEL's default as '`qwen2.5-coder-0.5b`'; "
        "the code's is '`qwen2.5-coder-1.5b`'"
    ]


def test_a_row_that_leaves_out_an_accepted_value_fails() -> None:
    row = _row_of(_table(), "OPENJEV_DEBIAS")
    text = _table().replace(row, row.replace("`off`", "off"))
    assert _problems_added(text) == [
        "docs/settings.md's row for OPENJEV_DEBIAS does not name the accepted value(s) off"
    ]


def test_a_row_for_a_setting_the_code_does_not_read_fails() -> None:
    text = _table() + "\n| `OPENJEV_PERMUTATION` | — | a misspelt row |\n"
    assert _problems_added(text) == [
        "docs/settings.md's settings table has a row for OPENJEV_PERMUTATION, "
        "which serving/config.py does not read: remove it"
    ]


def test_a_static_default_is_written_as_a_value_its_variable_accepts() -> None:
    checked = 0
    for spec in SETTINGS:
        rule = _rule(spec)
        if rule.default_text or spec.default is MISSING or spec.default is None:
            continue
        text = value_text(spec, spec.default)
        if CHECKOUT not in text:
            assert rule.parse(text) == spec.default, variable(spec)
            checked += 1
    assert checked > 30
    assert value_text(_spec("calibration"), True) == "on"  # its parser reads on/off, not true/false
    assert value_text(_spec("model_cache"), _spec("model_cache").default) == "<checkout>/.cache/models"


def test_a_choice_rule_lists_values_its_parser_accepts() -> None:
    choices = {variable(spec): accepted_values(spec) for spec in SETTINGS if accepted_values(spec)}
    assert choices["OPENJEV_DEBIAS"] == ["auto", "on", "off"]
    assert {"OPENJEV_BRANCH_MODE", "OPENJEV_CALIBRATION", "OPENJEV_PROFILE"} <= set(choices)
    for spec in SETTINGS:
        for value in accepted_values(spec):
            _rule(spec).parse(value)  # raises for a word of prose the pattern took for a value


OTHER_VARIABLES = {
    "OPENJEV_PYTHON": "scripts/bootstrap.sh",
    "OPENJEV_MODAL_MAX_CONTAINERS": "modal_app.py",
    "OPENJEV_MODAL_SECRETS": "modal_app.py",
    "OPENJEV_MODAL_SGLANG_IMAGE": "modal_app.py",
    "OPENJEV_STREAM_URL": "docs/streaming.md",
    "OPENJEV_TEST_POSTGRES_URL": "scripts/test.sh",
    "OPENJEV_TEST_REDIS_URL": "tests/admin/test_dashboard_live.py",
    "OPENJEV_WORKERS_STATE": "serving/workers.py",
    "OPENJEV_COMPOSE_SUBNET": "deploy/compose.yaml",
}
"""`OPENJEV_*` variables that are not settings, each with the file that reads it (the streaming page's
example client reads its own; `serve` sets the workers' state file for its workers)."""
VARIABLE = re.compile(r"\bOPENJEV_[A-Z0-9_]*[A-Z0-9]\b")


def test_every_openjev_variable_the_docs_name_is_a_setting_or_read_where_listed() -> None:
    settings = {variable(spec) for spec in SETTINGS}
    for name, reader in OTHER_VARIABLES.items():
        assert name in (BASE_DIR / reader).read_text(encoding="utf-8"), f"{reader} no longer reads {name}"
    pages = [README, *sorted((BASE_DIR / "docs").glob("*.md"))]
    unknown = {
        f"{page.relative_to(BASE_DIR)}: {name}"
        for page in pages
        for name in VARIABLE.findall(page.read_text(encoding="utf-8"))
        if name not in settings and name not in OTHER_VARIABLES
    }
    assert not unknown, f"the docs name variables nothing reads: {sorted(unknown)}"


STATED_DEFAULT = re.compile(r"`(OPENJEV_[A-Z0-9_]+)`\s*(?:\||\()\s*(?:default )?([0-9][0-9.]*)(?=[\s)|])")
"""A number stated right after a setting's name in prose or a table: `OPENJEV_X` (20 s), | `OPENJEV_X` | 16 |."""


def _number_is(text: str, default: object) -> bool:
    return isinstance(default, int | float) and float(text.rstrip(".")) == float(default)


def test_a_default_the_docs_state_beside_a_settings_name_is_the_codes() -> None:
    defaults: dict[str, object] = {variable(spec): spec.default for spec in SETTINGS}
    stated = [
        (page.relative_to(BASE_DIR), name, number)
        for page in [README, *sorted((BASE_DIR / "docs").glob("*.md"))]
        for name, number in STATED_DEFAULT.findall(page.read_text(encoding="utf-8"))
        if name in defaults
    ]
    assert len(stated) > 10
    wrong = [
        f"{page}: {name} ({number}), the code's default is {defaults[name]}"
        for page, name, number in stated
        if not _number_is(number, defaults[name])
    ]
    assert not wrong, wrong
