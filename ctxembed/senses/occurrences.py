"""Find every occurrence of some words in a corpus, in one streaming pass and bounded memory.

    forms = {"bass": word_forms("bass", known), "plant": word_forms("plant", known)}
    scan = scan_corpus(open_corpus("corpus.txt"), forms, max_occurrences=2000, seed=0)
    scan.occurrences["plant"][0]      # Occurrence(word, form, line, start, end, text)

The corpus is read in blocks of characters; one compiled regular expression over each block
finds the candidate lines, so the lines that hold none of the words are never split into lines
or tokens. Each word keeps at most ``max_occurrences`` occurrences, a uniform sample of all of
them (reservoir sampling, seeded); a line longer than ``max_line_chars`` is skipped and counted,
and never held whole.
"""

from __future__ import annotations

import io
import random
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from ctxembed.errors import DataError, UsageError
from ctxembed.vectors import corpus

BLOCK_CHARS = 1 << 20  # characters read at a time: large enough that the regex, not Python, is the cost
DEFAULT_MAX_LINE_CHARS = 20_000  # a longer line is skipped without being kept whole

# Regular inflections of English nouns and verbs. Irregular ones (a short table below) are added;
# only the forms the vocabulary knows are kept, so "bass" never looks for "bassed".
_IRREGULAR = {
    "be": ("am", "is", "are", "was", "were", "been", "being"),
    "have": ("has", "had", "having"),
    "do": ("does", "did", "done", "doing"),
    "go": ("goes", "went", "gone", "going"),
    "run": ("runs", "ran", "running"),
    "see": ("sees", "saw", "seen", "seeing"),
    "take": ("takes", "took", "taken", "taking"),
    "give": ("gives", "gave", "given", "giving"),
    "get": ("gets", "got", "gotten", "getting"),
    "make": ("makes", "made", "making"),
    "come": ("comes", "came", "coming"),
    "know": ("knows", "knew", "known", "knowing"),
    "draw": ("draws", "drew", "drawn", "drawing"),
    "drive": ("drives", "drove", "driven", "driving"),
    "strike": ("strikes", "struck", "striking"),
    "hold": ("holds", "held", "holding"),
    "hang": ("hangs", "hung", "hanged", "hanging"),
    "lie": ("lies", "lay", "lain", "lying", "lied"),
    "leave": ("leaves", "left", "leaving"),
    "find": ("finds", "found", "finding"),
    "man": ("men",),
    "woman": ("women",),
    "child": ("children",),
    "foot": ("feet",),
    "tooth": ("teeth",),
    "mouse": ("mice",),
    "goose": ("geese",),
    "leaf": ("leaves",),
    "life": ("lives",),
    "knife": ("knives",),
    "wife": ("wives",),
    "half": ("halves",),
    "shelf": ("shelves",),
    "calf": ("calves",),
}
_VOWELS = set("aeiou")


def inflections(word: str) -> list[str]:
    """Candidate forms of an English noun or verb: plural / 3rd person, past, -ing (a superset)."""
    w = word.lower()
    forms = [w, *_IRREGULAR.get(w, ())]
    if w.endswith(("s", "x", "z", "ch", "sh")):
        forms.append(w + "es")
    elif w.endswith("y") and len(w) > 1 and w[-2] not in _VOWELS:
        forms.append(w[:-1] + "ies")
    else:
        forms.append(w + "s")
    if w.endswith("e"):
        forms += [w + "d", w[:-1] + "ing"]
    elif w.endswith("y") and len(w) > 1 and w[-2] not in _VOWELS:
        forms += [w[:-1] + "ied", w + "ing"]
    else:
        forms += [w + "ed", w + "ing"]
        # one vowel before one final consonant (stop, plan): the consonant doubles
        if len(w) >= 3 and w[-1] not in _VOWELS | set("wxy") and w[-2] in _VOWELS and w[-3] not in _VOWELS:
            forms += [w + w[-1] + "ed", w + w[-1] + "ing"]
    return list(dict.fromkeys(forms))


def word_forms(word: str, known: Callable[[str], bool] | None = None) -> list[str]:
    """The word and those of its inflections that ``known`` accepts (the word itself is always kept)."""
    forms = inflections(word)
    return [f for f in forms if f == word.lower() or known is None or known(f)]


def parse_forms(values: Iterable[str], words: list[str]) -> dict[str, list[str]]:
    """``--forms`` values -> {word: forms}. A value is ``WORD:form,form`` or, when it names a single
    one of the words (or there is one word), just ``form,form``."""
    chosen: dict[str, list[str]] = {}
    lowered = [w.lower() for w in words]
    for value in values:
        head, colon, rest = value.partition(":")
        if colon:
            owner, forms = head.strip().lower(), rest
            if owner not in lowered:
                raise UsageError(
                    f"{{forms}} {value!r}: {owner!r} is not one of the words ({', '.join(words)})", "forms"
                )
        else:
            forms = value
            named = [w for w in lowered if w in {f.strip().lower() for f in value.split(",")}]
            if len(named) == 1:
                owner = named[0]
            elif len(lowered) == 1:
                owner = lowered[0]
            else:
                raise UsageError(
                    f"{{forms}} {value!r}: say which word these forms belong to, e.g. {{forms}} WORD:a,b", "forms"
                )
        listed = [f.strip().lower() for f in forms.split(",") if f.strip()]
        if not listed:
            raise UsageError(f"{{forms}} {value!r}: no forms given", "forms")
        bad = [f for f in listed if not re.fullmatch(r"[^\W_]+(?:[-.'][^\W_]+)*", f)]
        if bad:
            raise UsageError(f"{{forms}}: {bad[0]!r} is not a single word", "forms")
        chosen[owner] = list(dict.fromkeys(chosen.get(owner, []) + listed))
    return chosen


@dataclass(frozen=True)
class Occurrence:
    """One occurrence: which word, the form written, 1-based line number, character span in the line."""

    word: str
    form: str
    line: int
    start: int
    end: int
    text: str  # the whole line, without its newline


@dataclass
class Scan:
    """What one pass over a corpus found."""

    occurrences: dict[str, list[Occurrence]]  # word -> sampled occurrences, in corpus order
    counts: dict[str, int]  # word -> every occurrence seen (before sampling)
    lines: int = 0
    chars: int = 0
    candidate_lines: int = 0
    long_lines: int = 0  # lines over max_line_chars that hold a form: skipped, never kept whole
    blank: bool = True  # the corpus holds no non-space character
    per_form: dict[str, int] = field(default_factory=dict)


class _Reservoir:
    """A uniform sample of at most ``size`` items from a stream (Vitter's algorithm R), seeded."""

    def __init__(self, size: int | None, rng: random.Random):
        self.size, self.rng, self.items, self.seen = size, rng, [], 0

    def offer(self, item) -> None:
        self.seen += 1
        if self.size is None or len(self.items) < self.size:
            self.items.append(item)
            return
        slot = self.rng.randrange(self.seen)
        if slot < self.size:
            self.items[slot] = item


def open_corpus(source: str | Path) -> tuple[IO[str], str]:
    """A text stream of a corpus file (``.gz`` read as gzip) or stdin ("-"), and its display name."""
    stream, name = corpus.open_corpus(source)
    return _text(stream), name


def _text(raw) -> IO[str]:
    return io.TextIOWrapper(raw, encoding="utf-8", errors="strict", newline=None)


class _Finder:
    """Whole-word occurrences of any form, case-insensitively, at the speed of ``str.find``.

    One regex alternation with IGNORECASE costs ~30 ns a character in CPython's engine; instead the
    lower-cased block is searched for each stem (a form no other form starts with) by ``str.find``,
    and only at its hits does the compiled regex check the whole form and the word boundaries."""

    def __init__(self, forms: dict[str, list[str]]):
        self.owner: dict[str, str] = {}  # form -> the word it belongs to
        for word, listed in forms.items():
            for form in listed:
                self.owner.setdefault(form.lower(), word)
        ordered = sorted(self.owner, key=lambda f: (-len(f), f))  # longest first: "banks" before "bank"
        alternatives = "|".join(re.escape(f) for f in ordered)
        boundaries = (r"(?<![\w'-])", r"(?![\w-])")  # "bank's" is bank; "bank-note", "banker" are not
        self.exact = re.compile(f"{boundaries[0]}(?:{alternatives}){boundaries[1]}")
        self.folded = re.compile(self.exact.pattern, re.IGNORECASE)
        self.stems = [f for f in ordered if not any(g != f and f.startswith(g) for g in ordered)]

    def search(self, text: str, pos: int = 0) -> bool:
        return self.folded.search(text, pos) is not None

    def spans(self, text: str) -> list[tuple[int, int]]:
        """(start, end) of every occurrence in ``text``, in order."""
        lowered = text.lower()
        if len(lowered) != len(text):  # a rare character whose lower case is longer: offsets would drift
            return [m.span() for m in self.folded.finditer(text)]
        found = []
        for stem in self.stems:
            at = lowered.find(stem)
            while at >= 0:
                match = self.exact.match(lowered, at)
                if match is not None:
                    found.append(match.span())
                at = lowered.find(stem, at + 1)
        found.sort()
        return found


def _blocks(stream: IO[str], name: str) -> Iterator[str]:
    while True:
        try:
            block = stream.read(BLOCK_CHARS)
        except UnicodeDecodeError as exc:
            raise DataError(f"{name}: not UTF-8 text (a binary file?): {exc.reason} at byte {exc.start}") from None
        except (OSError, EOFError) as exc:
            raise DataError(f"{name}: cannot read ({exc})") from None
        if not block:
            return
        if "\x00" in block:
            raise DataError(f"{name}: holds NUL bytes: a binary file, not text")
        yield block


def scan_corpus(
    stream: IO[str],
    forms: dict[str, list[str]],
    *,
    name: str = "corpus",
    max_occurrences: int | None = None,
    seed: int = 0,
    max_line_chars: int = DEFAULT_MAX_LINE_CHARS,
    progress: Callable[[int], None] | None = None,
) -> Scan:
    """Every occurrence of every form, in one pass; ``progress(chars)`` is called after each block."""
    finder = _Finder(forms)
    rng = random.Random(seed)
    reservoirs = {word: _Reservoir(max_occurrences, rng) for word in forms}
    scan = Scan({}, {}, per_form={})
    line_number = 0  # lines finished before the current buffer
    tail = ""  # the unfinished last line of the previous block
    skipping = False  # inside an over-long line: drop text until its end
    counted = False  # ... and that line was counted in long_lines
    for block in _blocks(stream, name):
        scan.chars += len(block)
        if scan.blank and not block.isspace():
            scan.blank = False
        if skipping:  # the rest of an over-long line: counted once if a form shows up in it
            cut = block.find("\n")
            rest = block if cut < 0 else block[:cut]
            if not counted and finder.search(rest):
                scan.long_lines, counted = scan.long_lines + 1, True
            if cut < 0:
                continue
            block, skipping = block[cut + 1 :], False
            line_number += 1
        buffer = tail + block
        last = buffer.rfind("\n")
        complete, tail = (buffer[: last + 1], buffer[last + 1 :]) if last >= 0 else ("", buffer)
        line_number = _scan_text(complete, line_number, finder, reservoirs, scan, max_line_chars)
        if len(tail) > max_line_chars:
            counted = finder.search(tail)
            scan.long_lines += counted
            skipping, tail = True, ""
        if progress is not None:
            progress(scan.chars)
    if tail:
        line_number = _scan_text(tail + "\n", line_number, finder, reservoirs, scan, max_line_chars)
    elif skipping:
        line_number += 1
    scan.lines = line_number
    for word, reservoir in reservoirs.items():
        scan.counts[word] = reservoir.seen
        scan.occurrences[word] = sorted(reservoir.items, key=lambda o: (o.line, o.start))
    return scan


def _scan_text(text, first_line, finder, reservoirs, scan, max_line_chars) -> int:
    """Scan complete lines (``text`` ends with a newline); return the number of lines done after them."""
    position, line_number = 0, first_line  # text[:position] holds line_number finished lines
    line_start, line_end, line = 0, -1, None
    for start, end in finder.spans(text):
        if start > line_end:  # the first occurrence on a new line
            line_start = text.rfind("\n", 0, start) + 1
            line_number += text.count("\n", position, line_start)
            position = line_start
            line_end = text.find("\n", line_start)
            line = text[line_start:line_end]
            if len(line) > max_line_chars:
                scan.long_lines += 1
                line = None
            else:
                scan.candidate_lines += 1
        if line is None:
            continue
        form = text[start:end].lower()
        word = finder.owner[form]
        scan.per_form[form] = scan.per_form.get(form, 0) + 1
        reservoirs[word].offer(Occurrence(word, form, line_number + 1, start - line_start, end - line_start, line))
    return line_number + text.count("\n", position)
