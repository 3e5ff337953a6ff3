"""The task message (lab/protocol.py): the few lines that check it against
pydantic's own validation."""

from pydantic import ValidationError

from lab.protocol import _VALIDATOR, Kind, Queue, TaskMessage, Variant
from services.bare.bench_task import message


def _outcome(validate, payload):
    """What a validator makes of a payload: the message, or where the fields it rejects are."""
    try:
        return validate(payload)
    except ValidationError as exc:
        return sorted(str(e["loc"]) for e in exc.errors())


def _validated(payload):
    return _outcome(TaskMessage.validate, payload)


def _validated_by_pydantic(payload):
    return _outcome(_VALIDATOR.validate_python, payload)


def test_a_message_is_checked_by_the_few_lines_exactly_as_pydantic_checks_it():
    ok = TaskMessage.new("run-1", Queue.saq, Kind.cpu, Variant.process, 7)
    wrong = [
        {},
        {"run": "x y"},
        {"run": "a\n"},
        {"run": "-a"},
        {"run": "r" * 65},
        {"run": 5},
        {"task_id": 1},
        {"queue": "nope"},
        {"queue": ["saq"]},
        {"kind": "IO"},
        {"variant": None},
        {"value": "3"},
        {"value": 2.0},
        {"value": 2.5},
        {"value": True},
        {"value": None},
        {"enqueued_at": 3},
        {"enqueued_at": "3.5"},
        {"enqueued_at": None},
        {"extra": 1},
    ]
    assert TaskMessage.validate(ok.payload()) == ok
    assert TaskMessage.validate({**ok.payload(), "extra": 1}) == ok  # unknown keys are ignored
    for change in wrong:
        payload = {**ok.payload(), **change}
        assert _validated(payload) == _validated_by_pydantic(payload), change
    for payload in ({k: v for k, v in ok.payload().items() if k != "value"}, None, [1], "text"):
        assert _validated(payload) == _validated_by_pydantic(payload), payload
    assert isinstance(_validated({**ok.payload(), "value": "x"}), list)  # rejected, naming the field


def test_a_bare_apps_task_has_the_lab_messages_shape_and_validates_as_one():
    """`make bench`'s bare apps send a task as large as the lab's message, so a
    library's cost of the task's size is not counted as the lab's."""
    lab = TaskMessage.new("run-1", Queue.procrastinate, Kind.io, Variant.simple, 1).payload()
    bare = message("procrastinate", "io", "simple", 1)
    assert {k: type(v) for k, v in bare.items()} == {k: type(v) for k, v in lab.items()}
    assert len(bare["task_id"]) == len(lab["task_id"])
    assert TaskMessage.validate(bare).value == 1
    assert message("procrastinate", "io", "simple", 1)["task_id"] != bare["task_id"]
