"""Where an API key may go. A key travels with its origin: it is sent only to the base URL's
origin (scheme, host, port) configured in the same place as the `apiKeyEnv` that names its
variable — the environment, the user settings file or the editor's start-up options — and never
over plain HTTP to a host off this machine.

Why: the server cannot tell whether what an editor sends came from the user's configuration or
from a repository's files, so a key named in one place never follows a base URL set in another
(a repository's settings pointing `baseUrl` at their own host get no key), and a key never
crosses a network in clear text. docs/security.md has the whole threat model.
"""

from __future__ import annotations

import functools
import ipaddress
from dataclasses import dataclass
from urllib.parse import urlsplit

BUILTIN_PLACE = "built-in defaults"


@dataclass(frozen=True)
class KeyRoute:
    """Where a profile's `apiKeyEnv` and `baseUrl` in force were set (settings sources by name),
    and the base URL the place naming the variable configures for the profile itself: its own
    block's, else its `defaults` block's, else the built-in default."""

    named_in: str
    base_url_from: str
    own_base_url: str


@dataclass(frozen=True)
class KeyDecision:
    send: bool
    why: str
    """a sentence a person can act on: sent where, or why not and what to change"""
    variable: str | None = None
    missing: bool = False
    """the variable is allowed to go but is not set in the environment"""

    @property
    def needed(self) -> bool:
        return self.variable is not None


Origin = tuple[str, str, int]


@functools.lru_cache(maxsize=64)  # asked of the same few URLs for every request
def origin(url: str) -> Origin | None:
    """(scheme, host, port) of an http(s) URL, with the scheme's default port; None if it has
    no usable host or port."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https") or not parts.hostname:
        return None
    return scheme, parts.hostname.lower().rstrip("."), port if port is not None else (443 if scheme == "https" else 80)


@functools.lru_cache(maxsize=64)
def is_loopback(host: str) -> bool:
    """Whether `host` names this machine only: `localhost`, or a literal loopback address
    (127.0.0.0/8, ::1, or IPv4 loopback mapped into IPv6). Other names under `.localhost` are not:
    they go to the resolver, which may send them anywhere."""
    host = host.lower().strip("[]").rstrip(".")
    if host == "localhost":
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    mapped = getattr(address, "ipv4_mapped", None)
    return address.is_loopback or (mapped is not None and mapped.is_loopback)


def shown(found: Origin) -> str:
    scheme, host, port = found
    default = 443 if scheme == "https" else 80
    host = f"[{host}]" if ":" in host else host
    return f"{scheme}://{host}" + ("" if port == default else f":{port}")


def decide(variable: str | None, base_url: str, route: KeyRoute | None, present: bool) -> KeyDecision:
    """Whether the key in `variable` goes with requests to `base_url`, and why (or why not)."""
    if not variable:
        return KeyDecision(False, "none configured")
    target = origin(base_url)
    if route is None or target is None:
        return KeyDecision(False, f"${variable} is not sent: where apiKeyEnv was set is not known", variable)
    if origin(route.own_base_url) != target:
        advice = f"Set baseUrl in {route.named_in} too" + (
            "." if route.base_url_from == BUILTIN_PLACE else f", or remove the one in {route.base_url_from}.")
        return KeyDecision(False, (
            f"${variable} is not sent to {shown(target)}: apiKeyEnv was set in {route.named_in}, but the base "
            f"URL in force comes from {route.base_url_from}, and a key goes only to the base URL set in the same "
            f"place as its variable. {advice}"
        ), variable)
    if target[0] == "http" and not is_loopback(target[1]):
        return KeyDecision(False, (
            f"${variable} is not sent to {shown(target)}: that is plain HTTP to another machine, where the key "
            "could be read on the way. Use an https:// base URL."
        ), variable)
    if not present:
        return KeyDecision(False, f"${variable} is NOT set", variable, missing=True)
    return KeyDecision(True, f"${variable} is set; sent to {shown(target)} only", variable)
