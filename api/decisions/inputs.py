"""A Decisions API `input` as the conversation the model reads, every problem located in the body.

A string is one user message, as a System One string state is. A list of items keeps its order:
`message` items by role (`developer` reads as `system`: the chat templates served know no developer
role), function and custom tool calls as an assistant turn's `tool_calls` (consecutive calls in one
turn, as the chat templates render parallel calls), and their outputs as `tool` turns, so the model's
own chat template renders tool use as it was trained on. Their content parts read as `api.decisions.content`
reads them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson

from api.checking.checker import Checker
from api.checking.json_body import Loc, json_kind
from api.checking.limits import messages_over
from api.decisions.content import parts_check
from api.decisions.fields import string_check, unknown_keys_check
from inference.errors import value_quoted
from inference.images import Image
from inference.requests import Message, Role, conversation_of_text

MESSAGE_ROLES: dict[str, Role] = {"user": "user", "developer": "system", "system": "system", "assistant": "assistant"}
PART_KINDS = {
    "user": ("input_text", "input_image", "input_json"),
    "developer": ("input_text",),
    "system": ("input_text",),
    "assistant": ("output_text", "refusal"),
}
"""What each role's content list may hold (the SDK's types)."""
OUTPUT_PART_KINDS = ("input_text", "input_image")

_MESSAGE_KEYS = {"type", "role", "content", "phase"}
_CALL_KEYS = {"type", "call_id", "name", "id", "namespace", "status"}
_OUTPUT_KEYS = {"type", "call_id", "output", "id", "status"}


class _Turns:
    """The conversation being built, with the calls whose outputs may follow."""

    def __init__(self) -> None:
        self.messages: list[Message] = []
        self.calls: set[str] = set()

    def tool_call(self, *, call_id: str, name: str, arguments: Any) -> None:
        """A call joins the assistant turn of the calls just before it, else opens one."""
        call = {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}
        last = self.messages[-1] if self.messages else None
        if (
            last is not None
            and last.role == "assistant"
            and last.content == ""
            and last.extra[:1]
            and last.extra[0][0] == "tool_calls"
        ):
            self.messages[-1] = Message(
                role="assistant", content="", extra=(("tool_calls", [*last.extra[0][1], call]),)
            )
        else:
            self.messages.append(Message(role="assistant", content="", extra=(("tool_calls", [call]),)))
        self.calls.add(call_id)


def _message(check: Checker, turns: _Turns, item: dict[str, Any], loc: Loc) -> None:
    role = item.get("role")
    if role not in MESSAGE_ROLES:
        check.add(
            (*loc, "role"),
            f"Invalid role {value_quoted(role)}; expected one of {', '.join(MESSAGE_ROLES)}",
            "invalid_value",
        )
        return
    unknown_keys_check(check, item, _MESSAGE_KEYS if role == "assistant" else _MESSAGE_KEYS - {"phase"}, loc)
    if "content" not in item:
        check.add((*loc, "content"), "Missing required parameter: 'content'", "missing_required_parameter")
        return
    parts = parts_check(check, item["content"], (*loc, "content"), kinds=PART_KINDS[role])
    if parts is None:
        return
    if any(isinstance(p, Image) for p in parts):
        turns.messages.append(Message(role="user", content=tuple(parts)))
    else:
        text = "".join(p for p in parts if isinstance(p, str))
        turns.messages.append(Message(role=MESSAGE_ROLES[role], content=text))


def _function_call(check: Checker, turns: _Turns, item: dict[str, Any], loc: Loc) -> None:
    _call(check, turns, item, loc, argument_key="arguments", arguments=_arguments_read)


def _custom_tool_call(check: Checker, turns: _Turns, item: dict[str, Any], loc: Loc) -> None:
    _call(check, turns, item, loc, argument_key="input", arguments=lambda text: text)


def _arguments_read(text: str) -> Any:
    """A function call's arguments as the object it encodes (templates write `arguments | tojson`), or the
    text as it is when it is not a JSON object."""
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        return text
    return value if isinstance(value, dict) else text


def _call(
    check: Checker, turns: _Turns, item: dict[str, Any], loc: Loc, *, argument_key: str, arguments: Callable[[str], Any]
) -> None:
    unknown_keys_check(check, item, _CALL_KEYS | {argument_key}, loc)
    call_id, name = string_check(check, item, "call_id", loc), string_check(check, item, "name", loc)
    text = string_check(check, item, argument_key, loc)
    namespace = string_check(check, item, "namespace", loc, required=False)
    if call_id is not None and name is not None and text is not None:
        turns.tool_call(call_id=call_id, name=f"{namespace}.{name}" if namespace else name, arguments=arguments(text))


def _call_output(check: Checker, turns: _Turns, item: dict[str, Any], loc: Loc) -> None:
    unknown_keys_check(check, item, _OUTPUT_KEYS, loc)
    call_id = string_check(check, item, "call_id", loc)
    if call_id is not None and call_id not in turns.calls:
        check.add(
            (*loc, "call_id"),
            f"No tool call with call_id {value_quoted(call_id)} comes before this output",
            "invalid_value",
        )
    if "output" not in item:
        check.add((*loc, "output"), "Missing required parameter: 'output'", "missing_required_parameter")
        return
    parts = parts_check(check, item["output"], (*loc, "output"), kinds=OUTPUT_PART_KINDS)
    if parts is None:
        return
    if any(isinstance(p, Image) for p in parts):
        check.add(
            (*loc, "output"), "images are accepted in user messages only, not in a tool output", "unsupported_content"
        )
        return
    if call_id is not None:
        turns.messages.append(
            Message(
                role="tool", content="".join(p for p in parts if isinstance(p, str)), extra=(("tool_call_id", call_id),)
            )
        )


ITEM_KINDS: dict[str, Callable[[Checker, _Turns, dict[str, Any], Loc], None]] = {
    "message": _message,
    "function_call": _function_call,
    "function_call_output": _call_output,
    "custom_tool_call": _custom_tool_call,
    "custom_tool_call_output": _call_output,
}


def conversation_parse(check: Checker, value: Any) -> tuple[Message, ...]:
    """`input` as messages; problems go to `check`, located under `input`."""
    if isinstance(value, str):
        return conversation_of_text(text=value)
    if not isinstance(value, list) or not value:
        got = "an empty array" if value == [] else json_kind(value)
        check.add(
            ("input",),
            f"Invalid type: expected a string or a non-empty array of input items, got {got}",
            "invalid_type",
        )
        return ()
    over = messages_over(count=len(value))
    if over is not None:
        check.add(("input",), over, "token_limit")
        return ()
    turns = _Turns()
    for i, item in enumerate(value):
        loc: Loc = ("input", i)
        if not isinstance(item, dict):
            check.add(loc, f"Invalid type: expected an input item object, got {json_kind(item)}", "invalid_type")
            continue
        kind = item.get("type", "message")
        handler = ITEM_KINDS.get(kind) if isinstance(kind, str) else None
        if handler is None:
            check.add(
                (*loc, "type"),
                f"Invalid input item type {value_quoted(kind)}; expected one of {', '.join(ITEM_KINDS)}",
                "invalid_value",
            )
            continue
        handler(check, turns, item, loc)
    return tuple(turns.messages)
