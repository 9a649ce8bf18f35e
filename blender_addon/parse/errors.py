"""The one error type the importer reports to the user (operators catch it, report it, and cancel)."""


class BundleError(Exception):
    """A capture bundle cannot be imported; the message names the problem and the fix."""


class NotACaptureError(BundleError):
    """The JSON is some other file (e.g. the CLI's ``.keypoints.json`` beside a bundle): skippable in a batch."""
