"""What MetaGPT's own core tests expect of its API, checked in rolecast's words (issue 27).

Saving models and teams in MetaGPT's forms, ActionNode review and revise, MetaGPT's
recover flow as ``Team(on_error="recover")``, lookups by profile, the planner's status,
the configuration and context names MetaGPT scripts use. Models are scripted doubles.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any, Optional

import pytest
from loguru import logger
from pydantic import BaseModel, Field, SerializeAsAny, ValidationError

import rolecast.core.serialization as serialization
from actions import Action, ActionNode, UserRequirement
from actions.action_node import ReviewMode, ReviseMode
from actions.plan_and_act import Plan, Planner, Task, TaskType
from environment import Environment, SubscriptionRunner, Team
from environment.environment import RoleMap
from memory import Memory, Message, Resource, any_to_name, any_to_str
from rolecast.context import AttrDict, Context
from rolecast.core.config import Config, LLMConfig, LLMType, OpenAIConfig, PluginConfig
from rolecast.core.serialization import SerializationMixin, read_json_file, write_json_file
from rolecast.errors import ActionFailed, ConfigError, DataError, NodeNotFilled, NothingToRun, UsageError
from rolecast.testing import FunctionLLM, ScriptedLLM
from roles import Role, RoleReactMode


# ------------------------------------------------------------------- saving models
class Point(SerializationMixin):
    x: int
    y: int = 0


class LabelledPoint(Point):
    label: str = ""
    secret: str = Field(default="", exclude=True)


def test_a_mixed_in_model_saves_to_json_and_reads_back_as_the_class_it_was(tmp_path):
    path = tmp_path / "p.json"
    LabelledPoint(x=1, y=2, label="a", secret="s").serialize(path)
    saved = json.loads(path.read_text())
    assert saved == {"x": 1, "y": 2, "label": "a", "__module_class_name": f"{__name__}.LabelledPoint"}
    back = Point.deserialize(path)  # asked as the base, comes back as the subclass the file names
    assert type(back) is LabelledPoint and back.label == "a" and back.secret == ""


def test_serialize_without_a_path_writes_under_serdeser_path(tmp_path, monkeypatch):
    monkeypatch.setattr(serialization, "SERDESER_PATH", tmp_path)
    assert Point.get_serialization_path() == str(tmp_path / "Point.json")
    Point(x=7).serialize()
    assert Point.deserialize() == Point(x=7)


def test_a_saved_file_that_is_not_json_or_names_an_unknown_class_is_refused(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(DataError, match="cannot be read as JSON"):
        read_json_file(bad)
    with pytest.raises(DataError, match="no such file"):
        read_json_file(tmp_path / "missing.json")
    write_json_file(tmp_path / "other.json", {"x": 1, "__module_class_name": "evil.module.Thing"})
    with pytest.raises(UsageError, match="no loaded subclass"):
        Point.deserialize(tmp_path / "other.json")


def test_write_json_file_writes_sets_and_models_in_json_form(tmp_path):
    write_json_file(tmp_path / "d" / "x.json", {"tags": {"b"}, "point": Point(x=1)})
    data = read_json_file(tmp_path / "d" / "x.json")
    assert data["tags"] == ["b"] and data["point"]["x"] == 1


# ------------------------------------------------------------------------- actions
class Greet(Action):
    greeting: str = "hello"

    async def run(self, *args: Any) -> str:
        return self.greeting


class Holder(BaseModel):
    actions: list[SerializeAsAny[Action]] = []


def test_an_action_dump_names_its_class_and_a_base_typed_field_restores_it():
    dumped = Holder(actions=[Greet(greeting="hi"), Action(name="plain")]).model_dump()
    assert dumped["actions"][0]["__module_class_name"] == f"{__name__}.Greet"
    back = Holder(**dumped)
    assert type(back.actions[0]) is Greet and back.actions[0].greeting == "hi"
    assert type(back.actions[1]) is Action and back.actions[1].name == "plain"
    older = {"class_path": f"{__name__}.Greet", "name": "Greet", "greeting": "yo"}  # rolecast's earlier key
    assert Action.restore(older).greeting == "yo"


def test_an_empty_context_field_of_an_old_dump_means_no_context():
    assert Greet(context="", greeting="x").context is not None  # the running scope's
    with pytest.raises(UsageError, match="Context"):
        Greet(context="some text")


async def test_a_bare_action_with_nothing_to_do_raises_not_implemented():
    with pytest.raises(NothingToRun) as info:
        await Action().run()
    assert isinstance(info.value, NotImplementedError)
    # given something to work on (or a desc), the bare action still asks its model
    assert await Action(llm=ScriptedLLM(["answered"])).run("question") == "answered"


def test_any_to_name_is_the_class_name():
    assert any_to_name(Greet) == any_to_name(Greet()) == "Greet" == any_to_name(any_to_str(Greet))


# -------------------------------------------------------------------- action nodes
def project_node() -> ActionNode:
    return ActionNode(key="Project Name", expected_type=str, instruction="a snake_case name", example="game_2048")


async def test_review_and_revise_need_a_filled_node():
    node = project_node()
    with pytest.raises(NodeNotFilled) as info:
        await node.review()
    assert isinstance(info.value, RuntimeError)
    with pytest.raises(NodeNotFilled):
        await node.revise()


async def test_review_returns_comments_keyed_by_node_and_revise_rewrites_those_values():
    llm = ScriptedLLM([
        '[CONTENT]{"Project Name": "Snake Game"}[/CONTENT]',  # fill
        '[CONTENT]{"Project Name": "not snake case"}[/CONTENT]',  # review
        '[CONTENT]{"Project Name": "not snake case"}[/CONTENT]',  # revise: its review
        '[CONTENT]{"Project Name": "snake_game"}[/CONTENT]',  # revise: the new value
    ])
    node = await project_node().fill(req="a snake game", llm=llm)
    assert await node.review(review_mode=ReviewMode.AUTO) == {"Project Name": "not snake case"}
    review_prompt = llm.calls[1].prompt
    assert "Snake Game" in review_prompt and "a snake_case name" in review_prompt
    assert await node.revise(revise_mode=ReviseMode.AUTO) == {"Project Name": "snake_game"}
    assert node.instruct_content is not None and getattr(node.instruct_content, "Project Name") == "snake_game"
    assert "not snake case" in llm.calls[3].prompt
    llm.assert_complete()


async def test_review_with_no_comment_revises_nothing_and_a_comment_on_an_unknown_key_is_asked_again():
    llm = ScriptedLLM([
        '[CONTENT]{"Project Name": "snake_game"}[/CONTENT]',
        '[CONTENT]{"Budget": "too high"}[/CONTENT]',  # a key that was not reviewed: re-asked
        "[CONTENT]{}[/CONTENT]",
        "[CONTENT]{}[/CONTENT]",  # revise's review: no comment, so nothing is rewritten
    ])
    node = await project_node().fill(req="x", llm=llm)
    assert await node.review() == {}
    assert await node.revise() == {}
    llm.assert_complete()


async def test_complex_review_asks_once_per_child_with_the_parents_values():
    parent = ActionNode.from_children("Plan", [project_node(),
                                               ActionNode("Language", str, "the language", "python")])
    answers = iter([
        '[CONTENT]{"Project Name": "Snake", "Language": "py"}[/CONTENT]',
        '[CONTENT]{"Project Name": "use snake case"}[/CONTENT]',
        '[CONTENT]{"Language": "write it out"}[/CONTENT]',
    ])
    llm = FunctionLLM(lambda messages: next(answers))
    await parent.fill(req="x", llm=llm)
    comments = await parent.review(strgy="complex")
    assert comments == {"Project Name": "use snake case", "Language": "write it out"}
    assert len(llm.calls) == 3 and '"Snake"' in llm.calls[1].prompt and '"py"' in llm.calls[2].prompt
    assert await project_node().fill(req="x", llm=ScriptedLLM(['[CONTENT]{"Project Name": "a"}[/CONTENT]'])) \
        is not None
    with pytest.raises(UsageError, match="strgy"):
        await parent.review(strgy="thorough")
    with pytest.raises(UsageError, match="ReviewMode is one of"):
        await parent.review(review_mode="robot")  # type: ignore[arg-type]


async def test_human_review_asks_a_person(monkeypatch):
    monkeypatch.setattr("builtins.input", lambda prompt: '{"Project Name": "shorter please"}')
    node = await project_node().fill(req="x", llm=ScriptedLLM(['[CONTENT]{"Project Name": "a_b"}[/CONTENT]']))
    assert await node.review(review_mode=ReviewMode.HUMAN) == {"Project Name": "shorter please"}


def test_optional_fields_of_a_mapping_may_be_left_out():
    made = ActionNode.create_model_class("Opt", {
        "a": (Optional[list[str]], Field(default=None)),
        "b": (Optional[str], None),
        "c": (Optional[str], ""),
        "d": (str, ...),
    })
    value = made(d="x")
    assert value.a is None and value.b is None and value.c == "" and value.d == "x"
    with pytest.raises(ValidationError, match="Missing fields"):
        made(a=["x"])


def test_the_same_name_and_mapping_give_the_same_class():
    from typing import List  # noqa: UP035 - the typing spelling is part of what is checked

    one = ActionNode.create_model_class("Same", {"x": (list[str], ...), "y": (str, ...)})
    two = ActionNode.create_model_class("Same", {"y": (str, ...), "x": (List[str], ...)})  # noqa: UP006
    assert one is two and one(x=["a"], y="b") == two(x=["a"], y="b")
    assert ActionNode.create_model_class("Same", {"x": (list[int], ...), "y": (str, ...)}) is not one


def test_children_mapping_and_class_of_a_node_tree():
    class Tool(BaseModel):
        tool_name: str = Field(default="a", description="tool name")

    class Step(BaseModel):
        step_id: int = Field(default=1, description="step id")
        tool: Tool = Field(default=Tool())

    node = ActionNode.from_pydantic(Step)
    mapping = node._get_children_mapping()
    assert set(mapping) == {"step_id", "tool"} and isinstance(mapping["tool"], dict)
    children = node._create_children_class()
    assert children.__name__ == "Step_AN" and set(children.model_fields) == {"step_id", "tool"}
    assert "tool_name" in node.compile(context="")


# ----------------------------------------------------------------------- planning
def test_planner_status_shows_finished_work_the_current_task_and_its_guidance():
    done = Task(task_id="1", instruction="look at the data", task_type=TaskType.EDA.type_name,
                code="df.describe()", result="3 columns", is_finished=True)
    current = Task(task_id="2", instruction="fill the gaps", task_type=TaskType.DATA_PREPROCESS.type_name,
                   dependent_task_ids=["1"])
    planner = Planner(plan=Plan(goal="clean the data", tasks=[done, current]))
    status = planner.get_plan_status()
    assert "df.describe()" in status and "3 columns" in status and "fill the gaps" in status
    assert TaskType.DATA_PREPROCESS.value.guidance in status
    assert planner.current_task is not None and planner.current_task.task_id == "2"
    assert "df.describe()" not in planner.get_plan_status(exclude=["code"])
    assert TaskType.get_type("eda") is TaskType.EDA.value and TaskType.get_type("nope") is None
    assert Planner().plan is None and "no plan" in Planner().get_plan_status()


# ---------------------------------------------------------- configuration, context
def test_metagpt_provider_names_in_a_configuration():
    cfg = Config(llm={"api_type": "openai", "api_key": "k", "model": "gpt-4o-mini"})
    assert isinstance(cfg.llm, OpenAIConfig) and cfg.llm.api_type is LLMType.OPENAI
    assert cfg.get_openai_llm() is cfg.llm
    plugin = LLMConfig(llm_type="zhipu", api_key="k", app_id="a")  # a provider a plugin would register
    assert isinstance(plugin, PluginConfig) and plugin.api_type == "zhipu" and plugin.options["app_id"] == "a"
    assert Config(llm=plugin).get_openai_llm() is None
    with pytest.raises(ConfigError, match="several providers"):
        LLMConfig(api_type="openai", provider="local")


def test_context_names_metagpt_scripts_use(tmp_path):
    ctx = Context()
    assert ctx.repo is None and ctx.git_repo is None and ctx.src_workspace is None
    ctx.project_path = str(tmp_path)
    assert ctx.repo is not None and ctx.repo.workdir == tmp_path
    ctx.kwargs.set("a", 1)
    assert ctx.kwargs.a == 1 and ctx.kwargs.get("b", 2) == 2
    ctx.kwargs.remove("a")
    assert ctx.kwargs.a is None
    assert AttrDict(x=1).model_dump() == {"x": 1}
    model = ctx.llm_with_cost_manager_from_llm_config(LLMConfig(provider="openai", api_key="k", model="m"))
    assert model.model == "m"


async def test_parse_resources_lists_what_a_message_mentions_and_reasks_a_bad_answer():
    good = {"resources": [{"resource_type": "repo", "value": "iorisa/repo1", "description": "the target"}],
            "head": "branch1", "reason": "named"}
    llm = ScriptedLLM(['{"resources": "none"}', "```json\n" + json.dumps(good) + "\n```"])
    result = await Message("push branch1 to iorisa/repo1").parse_resources(llm, {"head": "the branch to push"})
    assert result["head"] == "branch1" and result["resources"] == [Resource(**good["resources"][0])]
    instructions = "\n".join(m["content"] for m in llm.calls[0].messages if m["role"] == "system")
    assert '"head": the branch to push' in instructions
    assert await Message("").parse_resources(llm) == {}


# ------------------------------------------------------------ lookups by profile
def test_a_profile_that_one_role_has_finds_it_names_stay_the_key():
    env = Environment()
    alice, bob = Role(name="Alice", profile="PM"), Role(name="Bob", profile="Engineer")
    env.add_roles([alice, bob])
    assert list(env.roles) == ["Alice", "Bob"]
    assert env.get_role("PM") is alice and env.roles["Engineer"] is bob and env.get_roles()["PM"] is alice
    assert env.model_dump()["roles"]["PM"]["name"] == "Alice"
    env.add_role(Role(name="Carol", profile="Engineer"))
    assert env.get_role("Engineer") is None
    with pytest.raises(KeyError, match="look them up by name"):
        env.roles["Engineer"]
    assert isinstance(env.get_roles(), RoleMap)


async def test_a_sender_name_is_found_in_the_history():
    alex = Role(name="Alex", profile="Democrat", actions=[Action(name="Say", instruction="argue")],
                llm=FunctionLLM(lambda m: "we must act"))
    history = await Team(roles=[alex], store=None).run(idea="climate", send_to="Alex", n_round=1)
    assert "Alex" in history and "Democrat" in history and "Nobody" not in history


# ------------------------------------------------------------------ recover flow
class Ok(Action):
    async def run(self, *args: Any) -> str:
        return "ok"


class Boom(Action):
    async def run(self, *args: Any) -> str:
        raise RuntimeError("boom")


class Worker(Role):
    name: str = "Worker"
    profile: str = "Builder"

    def __init__(self, **kwargs: Any):
        super().__init__(**kwargs)
        self.set_actions([Ok, Boom])
        self._set_react_mode(RoleReactMode.BY_ORDER)


async def test_recover_logs_saves_and_returns_and_the_saved_team_resumes_at_the_failed_action(tmp_path):
    saved: list[Any] = []
    team = Team(on_error="recover", store=tmp_path / "runs.db")
    team.hire([Worker()])
    seen: list[str] = []
    sink = logger.add(lambda m: seen.append(str(m)), level="ERROR")
    logger.enable("environment")
    try:
        history = await team.run(idea="build", n_round=2)
    finally:
        logger.remove(sink)
        logger.disable("environment")
    assert [m.content for m in history] == ["build"] and any("boom" in s for s in seen)
    worker = team.env.get_role("Worker")
    assert worker.rc.state == 1 and worker.rc.todo is None  # kept at Boom; its news back in its inbox
    assert [m.content for m in worker.rc.msg_buffer.pop_all()] == ["build"]
    saved.append(team._checkpoint_dir())
    restored = Team.deserialize(saved[0], store=None)
    back = restored.env.get_role("Builder")
    assert back.rc.state == 1 and back.recovered
    back.set_actions([Boom, Ok])  # starting over would fail at once; resuming at the second action succeeds
    restored.run_project("build")
    await restored.run(n_round=1)
    assert [m.cause_by for m in back.rc.memory.get()][-1] == any_to_str(Ok)
    assert back.rc.state == -1 and not back.recovered


async def test_stop_is_the_default_and_the_environment_variable_chooses_another(monkeypatch):
    team = Team(store=None, roles=[Worker()])
    with pytest.raises(ActionFailed):
        await team.run(idea="build", n_round=1)
    monkeypatch.setenv("ROLECAST_ON_ERROR", "recover")
    await Team(store=None, roles=[Worker()]).run(idea="build", n_round=1)  # returns
    monkeypatch.setenv("ROLECAST_ON_ERROR", "ignore")
    with pytest.raises(UsageError, match="ROLECAST_ON_ERROR"):
        Team(store=None)


async def test_a_save_by_a_serialize_that_returns_nothing_keeps_the_runs_own_error(tmp_path, monkeypatch):
    written: list[dict[str, Any]] = []
    monkeypatch.setattr(Team, "serialize", lambda self, stg_path=None: written.append(self.model_dump()))
    team = Team(store=tmp_path / "runs.db", roles=[Worker()])
    with pytest.raises(ActionFailed, match="boom"):
        await team.run(idea="build", n_round=1)
    assert written and "Worker" in written[0]["env"]["roles"]


async def test_a_plain_model_dump_of_a_team_reads_back(tmp_path):
    team = Team(store=None, investment=3.0, roles=[Worker()], on_error="recover")
    team.run_project("build")
    await team.run(n_round=1)
    write_json_file(tmp_path / "team.json", team.model_dump())
    back = Team.deserialize(tmp_path, store=None)
    role = back.env.get_role("Builder")
    assert type(role) is Worker and role.rc.state == 1 and back.investment == 3.0
    assert role.rc.memory == team.env.get_role("Worker").rc.memory
    assert [m.content for m in back.env.history.get()] == ["build"]
    again = Team(**team.model_dump(), store=None)
    assert type(again.env.roles["Worker"].actions[1]) is Boom
    ctx = Context()
    assert Team.deserialize(tmp_path, ctx, store=None).context is ctx
    write_json_file(tmp_path / "team.json", {**team.model_dump(), "investmnet": 1})
    with pytest.raises(UsageError, match="investmnet"):
        Team.deserialize(tmp_path, store=None)


def test_an_environment_rebuilt_from_its_dump_keeps_roles_of_their_classes_and_history():
    env = Environment()
    env.add_role(Worker())
    env.publish_message(Message("hello"))
    again = Environment(**env.model_dump())
    assert type(again.roles["Worker"]) is Worker and [type(a) for a in again.roles["Worker"].actions] == [Ok, Boom]
    assert [m.content for m in again.history.get()] == ["hello"]
    assert isinstance(Memory(**env.history.model_dump()), Memory)


# -------------------------------------------------------------------- subscription
async def test_a_failed_subscription_is_logged_with_its_name_before_it_is_raised():
    class Failing(Role):
        async def run(self, with_message: Any = None) -> Message | None:
            raise RuntimeError("down")

    async def trigger():
        yield Message("news")
        await asyncio.sleep(3600)

    runner = SubscriptionRunner()
    await runner.subscribe(Failing(name="F"), trigger(), lambda m: None)
    seen: list[str] = []
    sink = logger.add(lambda m: seen.append(str(m)), level="ERROR")
    logger.enable("environment")
    try:
        with pytest.raises(RuntimeError, match="down"):
            await runner.run()
    finally:
        logger.remove(sink)
        logger.disable("environment")
    assert any("Subscription-F" in s and "run error" in s for s in seen) and not runner.tasks


def test_user_requirement_is_the_default_watch():
    assert Role().rc.watch == {any_to_str(UserRequirement)}
