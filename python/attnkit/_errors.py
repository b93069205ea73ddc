"""The exceptions attnkit raises: one per error code of the C++ library, each also derived
from the built-in exception a Python caller expects, so ``except ValueError`` works."""


class Error(Exception):
    """Every error attnkit raises for something a caller did (bad config, unknown name,
    impossible shape); the message names the bad value and lists the valid ones."""


class InvalidArgumentError(Error, ValueError):
    """A value given is malformed or out of range."""


class NotFoundError(Error, KeyError):
    """An unknown name: backend, kind, model, file or layer."""

    def __str__(self) -> str:  # KeyError would print the message quoted
        return str(self.args[0]) if self.args else ""


class UnsupportedError(Error, NotImplementedError):
    """Valid input that no backend or kernel of this build can serve."""


class OutOfMemoryError(Error, MemoryError):
    """The KV-cache pool or a device allocation could not be satisfied."""


class PluginError(Error, RuntimeError):
    """A plugin library was rejected or returned an error."""


class InternalError(Error, RuntimeError):
    """A bug in attnkit; please report it."""
