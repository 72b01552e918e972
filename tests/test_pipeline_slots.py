"""A pipeline is a value with named slots, filled in one place for every policy; steps declare
what the engine may reuse; the layers under the policies import none of them."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import toolkeep
from toolkeep.policies import POLICIES, SeedMicrocompactor, build_steps, prepared_pipeline
from toolkeep.proxy.files import PersistOnEntry, with_files
from toolkeep.shortforms.inputs import RestoreInputs
from toolkeep.steps import SLOTS, Pipeline, Reuse, ToolCaps, repair_pairing, restore_originals, reuse_of
from toolkeep.window import RequestBudget

PACKAGE = Path(__file__).resolve().parent.parent / "src" / "toolkeep"


@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_every_policy_fills_the_same_slots_in_order(policy: str) -> None:
    pipeline = build_steps(toolkeep.Config(policy=policy))
    assert pipeline.repair == (repair_pairing,)
    assert pipeline.restore[0] is restore_originals
    assert isinstance(pipeline.enter[0], ToolCaps) and pipeline.caps is pipeline.enter[0]
    assert len(pipeline.compact) == 1 and pipeline.bound is None
    assert list(pipeline) == [*pipeline.repair, *pipeline.restore, *pipeline.enter, *pipeline.compact]
    assert pipeline.plans == (policy == "economy")


@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_a_request_budget_fills_the_bound_slot_and_restores_inputs(policy: str) -> None:
    pipeline = build_steps(toolkeep.Config(policy=policy, max_request_tokens=10_000))
    assert isinstance(pipeline.bound, RequestBudget)
    assert [type(s) for s in pipeline.restore].count(RestoreInputs) == 1


def test_a_list_of_ones_own_runs_as_given_and_gets_the_budget_too() -> None:
    mine = [repair_pairing, restore_originals]
    assert list(prepared_pipeline(toolkeep.Config(), mine)) == mine
    assert prepared_pipeline(toolkeep.Config(), mine).bound is None
    assert isinstance(prepared_pipeline(toolkeep.Config(max_request_tokens=9_000), mine).bound, RequestBudget)


def test_slots_are_filled_by_name_and_the_pipeline_given_is_left_as_it_was() -> None:
    pipeline = build_steps(toolkeep.Config())
    saving = with_files(pipeline, 3_000)
    assert isinstance(saving.enter[0], PersistOnEntry) and saving.enter[1:] == pipeline.enter
    assert not any(isinstance(s, PersistOnEntry) for s in pipeline)
    assert saving.with_slot("enter").enter == () and saving.caps is pipeline.caps
    with pytest.raises(ValueError, match="unknown slot"):
        pipeline.with_slot("middle", repair_pairing)  # type: ignore[arg-type]
    assert SLOTS[-1] == "bound"


def test_seed_replaces_slots_not_positions() -> None:
    seed = build_steps(toolkeep.Config(policy="seed"))
    spec = build_steps(toolkeep.Config(policy="spec"))
    assert isinstance(seed.compact[0], SeedMicrocompactor)
    caps = seed.caps
    assert caps is not None and (caps.head, caps.tail, caps.budget) == (5_000, 1_000, None)
    assert [type(s) for s in seed.enter] == [type(s) for s in spec.enter]


def test_what_a_step_declares_is_a_value_the_engine_reads() -> None:
    config = toolkeep.Config(recall_protect_turns=7)
    compactor = build_steps(toolkeep.Config(policy="spec")).compact[0]
    declared = reuse_of(compactor)
    assert declared.block_local and declared.ages(config)[-1] == 7
    assert reuse_of(lambda history, ctx: history) == Reuse()  # a plain function: whole histories
    assert reuse_of(repair_pairing).keeps_turn is not None
    economy = build_steps(toolkeep.Config()).compact[0]
    assert reuse_of(economy).plan is not None and not reuse_of(economy).block_local


def _imports(path: Path) -> set[str]:
    package = ["toolkeep", *path.relative_to(PACKAGE).parent.parts]
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join([*base, *(node.module or "").split(".")]).strip(".")
            names.add(module)
            names.update(f"{module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return names


def test_nothing_outside_the_policies_imports_a_policy_module() -> None:
    """The layers under the policies (the engine, the request budget, the steps, the shortened
    forms) use none of them; the fronts name the package (its POLICIES and builders) only."""
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if "policies" in path.relative_to(PACKAGE).parts:
            continue
        for name in _imports(path):
            parts = name.split(".")
            # a module of the package (its names, POLICIES and the builders, are the front door)
            if parts[:2] == ["toolkeep", "policies"] and (PACKAGE / "policies" / f"{parts[-1]}.py").is_file():
                offenders.append((str(path.relative_to(PACKAGE)), name))
    assert offenders == []
    for low in ("engine.py", "window.py", "shortforms/inputs.py", "steps/slots.py"):
        assert not any(n.startswith("toolkeep.policies") for n in _imports(PACKAGE / low)), low


def test_a_pipeline_value_runs_as_its_list_does() -> None:
    history = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "a", "name": "ls", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "a", "content": "x" * 90_000}]},
    ]
    config = toolkeep.Config(policy="spec")
    pipeline = build_steps(config)
    by_value = toolkeep.run_pipeline(history, format="anthropic", config=config, steps=pipeline)
    by_list = toolkeep.run_pipeline(
        history, format="anthropic", config=config, steps=list(Pipeline.of(pipeline))
    )
    assert by_value.messages == by_list.messages and len(by_value.report.cuts) == 1
