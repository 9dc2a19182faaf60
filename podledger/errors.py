"""Errors a user can act on: the CLI prints them as one line, never as a traceback."""


class UserError(Exception):
    """Something the user must fix (missing tool, bad config, unreachable service); says how."""
