"""The attention core: pure NumPy maths with shape comments, no I/O. Imports only config and errors."""
