"""Plain-text help with the conventions users expect: options grouped in panels, full command
summaries. Plain (no rich) so that help is cheap and reads the same in a pipe."""

from __future__ import annotations

import math

from typer.core import TyperArgument, TyperCommand, TyperGroup


class PanelCommand(TyperCommand):
    """A command whose help lists its options under their help panels (``rich_help_panel``)."""

    def format_options(self, ctx, formatter) -> None:
        sections: dict[str, list[tuple[str, str]]] = {}
        for param in self.get_params(ctx):
            record = param.get_help_record(ctx)
            if record is None:
                continue
            if param.param_type_name == "argument":
                title = "Arguments"
            else:
                panel = getattr(param, "rich_help_panel", None)
                title = _panel_title(panel) if panel else "Options"
            sections.setdefault(title, []).append(record)
        order = ["Arguments", "Options"]
        for title in order + [t for t in sections if t not in order]:
            if title in sections:
                with formatter.section(title):
                    formatter.write_dl(sections[title])

    def format_epilog(self, ctx, formatter) -> None:
        """The example, unwrapped: a command line to copy, never broken inside a flag (--all-\\nheads)."""
        if self.epilog:
            formatter.write_paragraph()
            formatter.write(" " * (formatter.current_indent + 2) + self.epilog.strip() + "\n")


def _panel_title(panel: str) -> str:
    """ "Attention options", but "Ingredients of the default preset" (already a title, not a noun)."""
    return panel if panel.lower().startswith("ingredients") else f"{panel} options"


class FullSummaryGroup(TyperGroup):
    """A group whose command list shows each command's whole first line, never cut with "…"."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        _adopt(self)

    def format_commands(self, ctx, formatter) -> None:
        rows = []
        for name in self.list_commands(ctx):
            command = self.get_command(ctx, name)
            if command is not None and not command.hidden:
                rows.append((name, command.get_short_help_str(limit=10_000)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


def _adopt(group: TyperGroup) -> None:
    """Give typer's plain commands and groups (built before we see them) the help above, and make
    every float option of every command refuse NaN and infinity."""
    for command in group.commands.values():
        if type(command) is TyperCommand:
            command.__class__ = PanelCommand  # only how help is formatted differs
        elif type(command) is TyperGroup:
            command.__class__ = FullSummaryGroup
            _adopt(command)
        for param in command.params:
            if getattr(param.type, "name", "") in ("float", "float range"):
                param.type = _finite(param.type)
            if type(param) is TyperArgument:
                param.__class__ = PlainArgument


class PlainArgument(TyperArgument):
    """An argument as usage lines usually write it: CORPUS, [SENTENCE], [SENTENCES]... (typer's
    plain help writes a required one in braces, {corpus}, which reads like a placeholder)."""

    def make_metavar(self, ctx=None, *, usage: bool = False) -> str:
        if self.metavar:  # written out by the command, e.g. "WORD... [CORPUS|-]"
            return self.metavar
        name = (self.name or "").upper()
        if usage and not self.required:
            name = f"[{name}]"
        return name + "..." if self.nargs != 1 else name


def _finite(float_type):
    """click's float type (any range kept) that also refuses nan, inf and -inf, which it accepts."""
    base = next(c for c in type(float_type).__mro__ if c.__name__ == "ParamType")

    class Finite(base):
        name = float_type.name

        def convert(self, value, param, ctx):
            number = float_type.convert(value, param, ctx)
            if not math.isfinite(number):
                self.fail(f"{value!r} is not a finite number", param, ctx)
            return number

        def get_metavar(self, *args, **kwargs):
            return float_type.get_metavar(*args, **kwargs)

        def __repr__(self) -> str:
            return repr(float_type)

    return Finite()
