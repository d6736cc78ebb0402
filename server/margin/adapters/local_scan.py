"""Looks for model servers on this machine's loopback ports (margin.core.local_servers says what
each answer means). Safe by construction: only 127.0.0.1 and ::1 are asked, each port with a
short connect timeout and all of them at once; the requests are plain GETs with no credentials
(no API key, no cookies, no proxy or .netrc from the environment) and redirects are not
followed, so nothing is sent anywhere but the port being asked."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Sequence

import httpx

from margin import __version__
from margin.core.local_servers import LOOPBACK_HOSTS, MODELS_PATH, PATHS, Answer, FoundServer, dedupe, identify

log = logging.getLogger(__name__)

CONNECT_TIMEOUT_S = 0.5
"""a server on this machine accepts at once; a port where nothing listens refuses at once"""
ANSWER_TIMEOUT_S = 3.0
"""how long each GET may take once connected"""
MAX_BODY_BYTES = 1 << 20
"""an answer longer than this is not read further (and not taken as JSON)"""


async def _get(client: httpx.AsyncClient, url: str) -> Answer:
    async with client.stream("GET", url) as response:
        body = b""
        async for chunk in response.aiter_bytes():
            body += chunk
            if len(body) > MAX_BODY_BYTES:
                return Answer(response.status_code)
    try:
        return Answer(response.status_code, json.loads(body))
    except ValueError:
        return Answer(response.status_code)


async def _ask(client: httpx.AsyncClient, host: str, port: int) -> FoundServer | None:
    root = f"http://{f'[{host}]' if ':' in host else host}:{port}"
    try:
        first = await _get(client, root + MODELS_PATH)  # nothing listening: refused here, at once
    except httpx.HTTPError:
        return None
    rest = [path for path in PATHS if path != MODELS_PATH]
    answers = {MODELS_PATH: first}
    for path, answer in zip(rest, await asyncio.gather(*(_get(client, root + p) for p in rest),
                                                       return_exceptions=True), strict=True):
        if isinstance(answer, Answer):
            answers[path] = answer
        elif not isinstance(answer, httpx.HTTPError):
            raise answer
    return identify(host, port, answers)


async def find_local_servers(ports: Sequence[int], hosts: Sequence[str] = LOOPBACK_HOSTS) -> list[FoundServer]:
    """The model servers answering on `ports` of this machine, one per port, in port order."""
    if any(host not in LOOPBACK_HOSTS for host in hosts):
        raise ValueError(f"only loopback hosts are searched ({', '.join(LOOPBACK_HOSTS)})")
    timeout = httpx.Timeout(ANSWER_TIMEOUT_S, connect=CONNECT_TIMEOUT_S)
    async with httpx.AsyncClient(timeout=timeout, follow_redirects=False, trust_env=False,
                                 headers={"User-Agent": f"margin/{__version__} doctor"}) as client:
        pairs = [(host, port) for port in ports for host in hosts]
        found = await asyncio.gather(*(_ask(client, host, port) for host, port in pairs))
    servers = dedupe(server for server in found if server is not None)
    log.info("local scan ports=%s found=%s", ",".join(map(str, ports)),
             ",".join(f"{s.kind}:{s.port}" for s in servers) or "none")
    return servers
