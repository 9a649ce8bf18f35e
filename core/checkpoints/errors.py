"""The one error type for anything wrong with a checkpoint; messages say what is wrong and how to fix it."""

from ..errors import Sapiens2Error


class CheckpointError(Sapiens2Error, ValueError):
    """A checkpoint could not be read or does not fit a Sapiens2 model (message names the problem and the fix)."""
