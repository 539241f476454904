"""What both sides of a link's HTTP/1.1 share: header tokens and connection persistence.

``downstream`` (toward the link's clients) and ``upstream`` (toward its server) each speak only
what a reverse proxy needs of RFC 9112; the rules that read the same on either side live here once.
"""

from __future__ import annotations

from typing import Final

from multidict import CIMultiDict

HEAD_LIMIT: Final = 1024 * 1024  # a start line and headers, at most


def header_tokens(headers: CIMultiDict[str], name: str) -> set[str]:
    """The comma-separated tokens of every ``name`` header, lower-cased."""
    return {token.strip().lower() for value in headers.getall(name, []) for token in value.split(",")}


def persists(version: str, headers: CIMultiDict[str]) -> bool:
    """Whether the connection stays open after this message (RFC 9112 9.3)."""
    tokens = header_tokens(headers, "Connection")
    return "close" not in tokens and (version != "HTTP/1.0" or "keep-alive" in tokens)
