"""One declaration per setting: limits, conflicts, presets as differences, generated ladder and CLI."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ctxembed.declarations import AttentionConfig, ReadOptions, declarations
from ctxembed.errors import SettingError, UsageError
from ctxembed.evaluation.ladder import ingredients, ladder
from ctxembed.presets import PRESET_CHANGES, PRESETS, SETTINGS, Settings, build_settings, fit_to_vectors
from tests.cli_helpers import fails, invoke, run_json

FLOATS = [name for name, spec in SETTINGS.items() if spec.kind is float]
BOUNDED = [(name, spec) for name, spec in {**SETTINGS, **declarations(ReadOptions)}.items() if spec.maximum]


def test_every_setting_has_help_and_a_flag():
    for name, spec in SETTINGS.items():
        assert spec.name == name and spec.help and spec.option.startswith("--")


@pytest.mark.parametrize("name", FLOATS)
@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, 1e308])
def test_float_settings_reject_nan_inf_and_huge_values(name, value):
    with pytest.raises(SettingError, match=f"^{name} must be a finite number"):
        build_settings("textbook", **{name: value})


@pytest.mark.parametrize("name", FLOATS)
@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "3.4e38"])
def test_float_options_reject_nan_inf_and_huge_values_with_exit_2(name, value):
    flag = SETTINGS[name].option
    message = fails(2, "attend", "the bank", flag, value)
    assert flag in message and "finite number" in message


@pytest.mark.parametrize("value", ["nan", "inf", "-inf"])
def test_every_float_option_of_every_command_refuses_nan_and_inf(value):
    import typer

    from ctxembed.cli import app

    group = typer.main.get_command(app)
    for path in _commands(group):
        command = group
        for name in path:
            command = command.commands[name]
        for param in command.params:
            if getattr(param.type, "name", "") in ("float", "float range"):
                with pytest.raises(Exception, match="finite|range"):  # click BadParameter
                    param.type.convert(value, param, None)


@pytest.mark.parametrize(("name", "spec"), BOUNDED, ids=[name for name, _ in BOUNDED])
def test_upper_limits_are_enforced_by_the_cli(name, spec):
    value = spec.maximum + 1 if spec.kind is int else spec.maximum * 2
    extra = ["--projection", "random"] if spec.requires == ("projection", "random") else []
    assert spec.option in fails(2, "attend", "the bank", spec.option, value, *extra)


def test_documented_limits_of_sizes():
    limits = {name: spec.maximum for name, spec in {**SETTINGS, **declarations(ReadOptions)}.items()}
    assert (limits["layers"], limits["heads"], limits["max_tokens"], limits["d_out"]) == (48, 64, 4096, 4096)


def test_library_errors_name_settings_not_flags():
    with pytest.raises(SettingError) as caught:
        build_settings("default", heads=0)
    assert caught.value.message == "heads must be an integer in [1, 64], not 0"
    assert "--" not in caught.value.message
    assert caught.value.render(lambda name: "--" + name) == "--heads must be an integer in [1, 64], not 0"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--weights", "w.npz", "--projection", "random"], "--weights is used only by --projection file"),
        (["--projection", "identity", "--weights", "w.npz"], "--weights is used only by --projection file"),
        (["--d-out", "5"], "--d-out is used only by --projection random"),
        (["--seed", "5"], "--seed is used only by --projection random"),
        (["--output-projection"], "--output-projection is used only by --projection random"),
        (["--projection", "file", "--seed", "1", "--weights", "w.npz"], "--seed is used only by --projection random"),
        (["--projection", "file"], "--projection file needs --weights"),
    ],
)
def test_conflicting_projection_options_are_usage_errors(args, message):
    assert message in fails(2, "attend", "the bank", *args)


def test_weights_alone_switch_an_identity_preset_to_the_file_projection():
    settings = build_settings("textbook", weights_file="w.npz")
    assert (settings.projection, settings.weights_file) == ("file", "w.npz")


def test_presets_are_differences_from_the_declared_defaults():
    assert PRESETS["textbook"] == Settings(preset="textbook")
    for name, changes in PRESET_CHANGES.items():
        values = PRESETS[name].values()
        differing = {k: v for k, v in values.items() if v != SETTINGS[k].default}
        assert differing == changes


def test_unknown_settings_and_presets_are_refused():
    with pytest.raises(UsageError, match="unknown setting"):
        build_settings("default", colour=True)
    with pytest.raises(UsageError, match="unknown preset 'fancy'"):
        build_settings("fancy")


def test_the_ladder_is_built_from_the_default_preset():
    parts = ingredients()
    assert set(parts) == {"abtt", "sif", "self-mask", "mix"}
    rungs = ladder()
    assert rungs["static"] is None and rungs["textbook"] == {}
    assert rungs["textbook+abtt"] == {"abtt": 3}
    masks = {"exclude_self": True, "exclude_twins": True}  # the self mask and the twin mask: one ingredient
    assert rungs["self-mask+abtt+sif"] == {"abtt": 3, "sif": 1e-4, **masks}  # the default without mix
    assert rungs["textbook+self-mask"] == masks
    assert rungs["textbook+mix"] == {"mix": "0.2,0.8"}
    assert rungs["previous-default"]["residual_scale"] == 1 / 9 and "mix" not in rungs["previous-default"]
    assert build_settings("textbook", **rungs["default"]).values() == PRESETS["default"].values()


def test_summary_and_explain_come_from_the_declarations():
    settings = build_settings("textbook", causal=True, causal_mode="after", heads=2, temperature=2.0)
    assert settings.summary() == (
        "preset textbook | scores x.x/sqrt(d)/T=2 | softmax | projection identity | causal (after softmax)"
        " | 2 heads, 1 layer"
    )
    assert "scores are divided by the temperature T=2" in settings.explain()
    assert not any("self masked" in line for line in settings.explain())


def test_a_preset_ingredient_too_big_for_the_vectors_steps_down():
    fitted, off = fit_to_vectors(PRESETS["default"], dimensions=3, words=4)
    assert off == ["abtt"] and fitted.abtt == 0 and fitted.sif == PRESETS["default"].sif
    kept, off = fit_to_vectors(PRESETS["default"], dimensions=3, words=4, keep=frozenset({"abtt"}))
    assert off == [] and kept.abtt == 3


def test_attention_config_validates_through_the_declarations():
    assert AttentionConfig(heads=2).heads == 2
    with pytest.raises(ValueError, match="layers"):
        AttentionConfig(layers=49)


# ------------------------------------------------------------------------------ the CLI, generated
def test_help_shows_choices_panels_and_limits():
    out = invoke("attend", "--help").stdout
    assert "[softmax|sum]" in out and "[before|after]" in out and "[identity|random|file]" in out
    assert "Attention options:" in out and "Ingredients of the default preset:" in out
    assert "[1<=x<=64]" in out
    assert "Example: ctxembed attend" in out


def _commands(group, path=()):
    """Every command of the CLI, as its argument path, subcommands included."""
    for name, command in group.commands.items():
        if hasattr(command, "commands"):
            yield from _commands(command, (*path, name))
        else:
            yield (*path, name)


def test_every_command_has_an_example_and_a_full_summary():
    import typer

    from ctxembed.cli import app

    top = " ".join(invoke("--help").stdout.split())
    assert "…" not in top and "moved each token." in top and "N×N matrix each." in top
    commands = list(_commands(typer.main.get_command(app)))
    assert len(commands) >= 9
    for command in commands:
        assert "Example: ctxembed " in invoke(*command, "--help").stdout, command


def test_version_and_completion():
    from ctxembed import __version__

    assert invoke("--version").stdout.strip() == f"ctxembed {__version__}"
    # typer detects the parent shell unless told not to, and then takes "bash" as a stray argument: under
    # `make test` the parent is make's /bin/sh ("Shell sh not supported"), so the shell is named explicitly.
    env = {**os.environ, "_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION": "1"}
    script = subprocess.run(
        [Path(sys.executable).parent / "ctxembed", "--show-completion", "bash"], capture_output=True, text=True, env=env
    )
    assert script.returncode == 0 and "complete -o default -F _ctxembed_completion ctxembed" in script.stdout


def test_default_preset_steps_down_on_the_toy_vectors_with_one_note():
    result = invoke("attend", "apple is phone the", "--vectors", "notes-toy", "--json")
    assert result.exit_code == 0, result.stderr
    notes = [line for line in result.stderr.splitlines() if not line.startswith("converting ")]
    assert len(notes) == 1 and "--abtt 3 turned off" in notes[0]
    doc = run_json("attend", "apple is phone the", "--vectors", "notes-toy", "--preset", "notes", "--json")
    assert [t["text"] for t in doc["tokens"]] == ["apple", "is", "phone", "the"]


def test_several_lines_on_attend_stdin_suggest_batch_or_compare():
    message = fails(2, "attend", input="the river bank\nthe money bank\n")
    assert "batch" in message and "compare" in message


def test_the_option_table_is_generated_from_the_declarations():
    import importlib.util

    from tests.conftest import REPO

    spec = importlib.util.spec_from_file_location("settings_docs", REPO / "scripts" / "settings_docs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    readme = (REPO / "docs" / "options.md").read_text(encoding="utf-8")
    # after adding or changing a setting: .venv/bin/python scripts/settings_docs.py
    assert module.readme_with_table(readme) == readme
    assert all(spec.option in readme for spec in SETTINGS.values())


def test_a_run_builds_only_its_command_and_gives_the_same_output():
    script = Path(sys.executable).parent / "ctxembed"
    args = ["compare", "we sat on the river bank", "I paid the bank", "--word", "bank", "--json"]
    alone = subprocess.run([script, *args], capture_output=True, text=True)
    assert alone.returncode == 0 and alone.stdout == invoke(*args).stdout
    listing = subprocess.run([script, "--help"], capture_output=True, text=True).stdout
    assert all(name in listing for name in ("attend", "compare", "neighbors", "batch", "eval", "vectors"))
    wrong = subprocess.run([script, "comapre", "x"], capture_output=True, text=True)
    assert wrong.returncode == 2 and "No such command" in wrong.stderr
