"""ctxembed: see how self-attention turns static word vectors into contextual ones.

The package is layered so that data flows one way::

    text --tokenize--> tokens --store/sources--> static vectors --attention--> contextual
         --explore--> results --render (rich tables) / output (JSON)--> terminal or pipe

``ctxembed.attention`` is pure NumPy with no I/O; ``ctxembed.cli`` only wires commands.
"""

__version__ = "0.1.0"
