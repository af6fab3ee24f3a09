"""Read a sitemap (or a sitemap index, one level deep) into a list of URLs. Parsing is pure.

Per the sitemaps protocol a sitemap lists URLs of its own host only; others (and those of another
scheme or port) are dropped, so a sitemap cannot point the warmer, and its headers, at somebody
else's site or at plain http. The XML parser is defusedxml's, told to refuse any DTD, entity
declaration or external reference whatever the document's encoding (a byte search for
``<!DOCTYPE`` misses the same document in UTF-16, and entities turned 2.7 KB into a 1 MB
``<loc>``); gzip bodies are decompressed with a bound.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from urllib.parse import urlsplit
from xml.etree.ElementTree import ParseError

from defusedxml import DefusedXmlException
from defusedxml.ElementTree import fromstring

from consumer.deploy.origin import same_origin
from consumer.errors import ConsumerError

MAX_SITEMAP_BYTES = 16 * 1024 * 1024
MAX_CHILD_SITEMAPS = 50
GZIP_MAGIC = b"\x1f\x8b"

Fetch = Callable[[str], bytes]
"""Returns the body of a URL or raises ``SitemapError``."""


class SitemapError(ConsumerError):
    """The sitemap could not be read."""


ChildError = Callable[[str, SitemapError], None]
"""Told about each child sitemap of an index that could not be read."""


def sitemap_urls(
    url: str, fetch: Fetch, limit: int, on_child_error: ChildError | None = None
) -> list[str]:
    """The page URLs of the sitemap at ``url``, in document order, at most ``limit``.

    ``SitemapError`` if ``url`` itself cannot be read. A child of an index that cannot be read is
    passed to ``on_child_error`` and the other children are still read (without a callback, its
    error is raised)."""
    kind, locations = parse_sitemap(fetch(url))
    if kind == "urlset":
        return same_host(url, locations)[:limit]
    urls: list[str] = []
    for child in same_host(url, locations)[:MAX_CHILD_SITEMAPS]:
        try:
            child_kind, child_locations = parse_sitemap(fetch(child))
        except SitemapError as exc:
            if on_child_error is None:
                raise
            on_child_error(child, exc)
            continue
        if child_kind == "urlset":
            urls.extend(same_host(child, child_locations))
        if len(urls) >= limit:
            break
    return urls[:limit]


def parse_sitemap(document: bytes) -> tuple[str, list[str]]:
    """``("urlset" | "sitemapindex", [loc, ...])``; raise ``SitemapError`` on anything else."""
    document = _gunzip(document) if document[:2] == GZIP_MAGIC else document
    try:
        root = fromstring(document, forbid_dtd=True, forbid_entities=True, forbid_external=True)
    except DefusedXmlException as exc:
        raise SitemapError(
            f"sitemap has a DTD or entities; refused ({type(exc).__name__})"
        ) from None
    except ParseError as exc:
        raise SitemapError(f"sitemap is not well-formed XML: {exc}") from None
    kind = _local(root.tag)
    if kind not in ("urlset", "sitemapindex"):
        raise SitemapError(f"not a sitemap: root element <{kind}>")
    locations = [
        (element.text or "").strip() for element in root.iter() if _local(element.tag) == "loc"
    ]
    return kind, [location for location in locations if location]


def same_host(base: str, urls: list[str]) -> list[str]:
    """The URLs of ``base``'s origin: same scheme, host and port, and no credentials."""
    return [url for url in urls if same_origin(base, url) and "@" not in urlsplit(url).netloc]


def _gunzip(data: bytes) -> bytes:
    inflater = zlib.decompressobj(wbits=zlib.MAX_WBITS | 16)
    try:
        plain = inflater.decompress(data, MAX_SITEMAP_BYTES)
    except zlib.error as exc:
        raise SitemapError(f"sitemap is not valid gzip: {exc}") from None
    if inflater.unconsumed_tail:
        raise SitemapError(f"sitemap is larger than {MAX_SITEMAP_BYTES} bytes uncompressed")
    return plain


def _local(tag: str) -> str:
    """The element name without its XML namespace."""
    return tag.rsplit("}", 1)[-1]
