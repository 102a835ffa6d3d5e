"""Terminal colours for heatmaps, chosen per colour mode so that every mode reads as one scale.

Rich turns a 24-bit colour into the nearest of 256 or 16 colours, and the nearest colours of a
light-to-dark blue ramp are not ordered (256: lavender, cyan, blue, teal; 16: white, grey, cyan,
dark grey). So each mode has its own ramp, light to dark by WCAG relative luminance:

- truecolor: the pictures' sequential scale (figures.SEQUENTIAL) at eighths;
- 256 colours: seven blues of the xterm colour cube (189 ... 17);
- 16 colours: light grey, cyan, bright blue, blue, two eighths each (the last eighth blue alone).

The text on a shaded cell is black or white, whichever contrasts more with the cell by WCAG 2's
formula; with 24-bit or 256 colours (whose values are fixed) that is at least 4.58:1 on any
colour. The 16 colours are the terminal's own; the ramp is chosen so that its text reaches 4.5:1
under both xterm's default palette and the VGA palette rich assumes (tests/test_colour.py).
"""

from __future__ import annotations

from functools import cache

from rich.color import EIGHT_BIT_PALETTE, Color
from rich.style import Style

from ctxembed.views.figures import MASKED_FILL, colour

RGB = tuple[int, int, int]

# xterm's default 16 colours (xterm's own, and what most terminal themes approximate).
XTERM_16: tuple[RGB, ...] = (
    (0, 0, 0), (205, 0, 0), (0, 205, 0), (205, 205, 0), (0, 0, 238), (205, 0, 205), (0, 205, 205), (229, 229, 229),
    (127, 127, 127), (255, 0, 0), (0, 255, 0), (255, 255, 0), (92, 92, 255), (255, 0, 255), (0, 255, 255),
    (255, 255, 255),
)  # fmt: skip
# The VGA colours rich's own downgrading assumes (rich.color.STANDARD_PALETTE).
VGA_16: tuple[RGB, ...] = (
    (0, 0, 0), (170, 0, 0), (0, 170, 0), (170, 85, 0), (0, 0, 170), (170, 0, 170), (0, 170, 170), (170, 170, 170),
    (85, 85, 85), (255, 85, 85), (85, 255, 85), (255, 255, 85), (85, 85, 255), (255, 85, 255), (85, 255, 255),
    (255, 255, 255),
)  # fmt: skip

# Heat levels 2..8 (level 1, the lowest eighth, stays unshaded), light to dark.
RAMP_256 = (189, 153, 111, 68, 26, 19, 17)
RAMP_16 = (7, 7, 6, 6, 12, 12, 4)  # light grey, cyan, bright blue, blue
# The diverging scale's negative side (cosine < 0), levels 2..8, light to dark reds.
REDS_256 = (224, 217, 210, 203, 167, 160, 124)
REDS_16 = (7, 7, 9, 9, 1, 1, 1)  # light grey, bright red, red

MODES = ("truecolor", "256", "16")


def luminance(rgb: RGB) -> float:
    """WCAG 2 relative luminance of an sRGB colour (0 black .. 1 white)."""

    def linear(channel: int) -> float:
        c = channel / 255
        return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4

    r, g, b = (linear(c) for c in rgb)
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast(a: RGB, b: RGB) -> float:
    """WCAG 2 contrast ratio of two colours, 1 .. 21."""
    darker, lighter = sorted((luminance(a), luminance(b)))
    return (lighter + 0.05) / (darker + 0.05)


def mode_of(console) -> str | None:
    """The colour mode of a rich console: "truecolor", "256", "16", or None (no colour: not a
    terminal, NO_COLOR, --color never)."""
    system = console.color_system
    if system is None or console.no_color:
        return None
    return {"truecolor": "truecolor", "256": "256"}.get(system, "16")


def rgb_of(color: Color, palette_16: tuple[RGB, ...] = XTERM_16) -> RGB:
    """The colour a terminal shows for ``color`` (16 colours: from ``palette_16``)."""
    if color.triplet is not None:
        return tuple(color.triplet)  # type: ignore[return-value]
    if color.number is not None and color.number < 16:
        return palette_16[color.number]
    return tuple(EIGHT_BIT_PALETTE[color.number])  # type: ignore[arg-type,return-value]


def _ink(background: Color, mode: str) -> Color:
    """Black or white text for ``background``: the one with the higher worst-case contrast (16
    colours: under xterm's and the VGA palette)."""
    black, white = {
        "truecolor": (Color.from_rgb(0, 0, 0), Color.from_rgb(255, 255, 255)),
        "256": (Color.from_ansi(16), Color.from_ansi(231)),
        "16": (Color.from_ansi(0), Color.from_ansi(15)),
    }[mode]
    palettes = (XTERM_16, VGA_16) if mode == "16" else (XTERM_16,)

    def worst(ink: Color) -> float:
        return min(contrast(rgb_of(ink, p), rgb_of(background, p)) for p in palettes)

    return black if worst(black) >= worst(white) else white


@cache
def heat_colour(level: int, mode: str, side: int = 0) -> Color | None:
    """The background of heat level ``level`` (0..8; 0 and 1: none) in ``mode``. ``side`` 0: the
    sequential scale; +1 and -1: the diverging scale's blue (above 0) and red (below 0) sides."""
    if level < 2:
        return None
    level = min(level, 8)
    if mode == "truecolor":
        if side:
            return Color.from_rgb(*colour(0.5 + side * level / 16, diverging=True))
        return Color.from_rgb(*colour(level / 8))
    ramp = {"256": REDS_256 if side < 0 else RAMP_256, "16": REDS_16 if side < 0 else RAMP_16}[mode]
    return Color.from_ansi(ramp[level - 2])


@cache
def heat_style(level: int, mode: str | None, side: int = 0) -> Style:
    """A shaded cell's style: the level's background and the text that contrasts with it most."""
    background = None if mode is None else heat_colour(level, mode, side)
    if background is None:
        return Style()
    return Style(bgcolor=background, color=_ink(background, mode))


def map_colour(level: int, mode: str) -> Color | None:
    """A model-view map's colour for level 0..8: the map shades its lowest eighths too, white."""
    if level >= 2:
        return heat_colour(level, mode)
    return Color.from_rgb(*colour(level / 8)) if mode == "truecolor" else Color.from_ansi(231 if mode == "256" else 15)


def masked_colour(mode: str) -> Color:
    """A masked cell of a model-view map: grey, darker than the ramp's lightest colours."""
    return Color.from_rgb(*MASKED_FILL) if mode == "truecolor" else Color.from_ansi(250 if mode == "256" else 8)
