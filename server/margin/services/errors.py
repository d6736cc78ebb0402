"""The failures a use case reports to a person: what happened and what to do, never a
traceback. The language server answers them as RequestFailed, the terminal prints them.

    RequestError          a request that cannot be served (disabled profile, missing template,
    │                     over budget, stale edit, unusable answer, …)
    ├── Busy              another chat or edit-ops request is running in the same thread
    └── NotFound          the thread named does not exist (deleted, or expired)
"""

from __future__ import annotations


class RequestError(Exception):
    """A request that cannot be served; the message is for a person."""


class Busy(RequestError):
    pass


class NotFound(RequestError):
    pass
