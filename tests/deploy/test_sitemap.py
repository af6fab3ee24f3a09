"""Sitemap parsing, pure: both document kinds, foreign hosts dropped, hostile documents refused."""

from __future__ import annotations

import gzip

import pytest

from bench.support.deploy_targets import sitemap, sitemap_index
from consumer.deploy.sitemap import SitemapError, parse_sitemap, sitemap_urls

BASE = "http://cache.test"


def test_a_urlset_lists_its_locations_in_order() -> None:
    urls = [f"{BASE}/a", f"{BASE}/b?x=1&y=2", f"{BASE}/c"]
    document = sitemap(urls).replace(b"&", b"&amp;")
    assert parse_sitemap(document) == ("urlset", urls)


def test_a_gzipped_sitemap_is_read() -> None:
    assert parse_sitemap(gzip.compress(sitemap([f"{BASE}/a"]))) == ("urlset", [f"{BASE}/a"])


def test_an_index_is_followed_one_level_and_foreign_hosts_are_dropped() -> None:
    documents = {
        f"{BASE}/sitemap.xml": sitemap_index([f"{BASE}/one.xml", "http://evil.test/x.xml"]),
        f"{BASE}/one.xml": sitemap([f"{BASE}/p1", "http://evil.test/p", f"{BASE}/p2"]),
    }
    fetched: list[str] = []

    def fetch(url: str) -> bytes:
        fetched.append(url)
        return documents[url]

    assert sitemap_urls(f"{BASE}/sitemap.xml", fetch, limit=10) == [f"{BASE}/p1", f"{BASE}/p2"]
    assert fetched == [f"{BASE}/sitemap.xml", f"{BASE}/one.xml"]


def test_only_urls_of_the_same_scheme_host_and_port_are_kept() -> None:
    listed = [
        "https://cache.test/secure", "HTTPS://Cache.test:443/default-port",
        "http://cache.test/plain-http", "https://cache.test:8443/other-port",
        "https://user:pw@cache.test/credentials", "https://cache.test.evil/x", "ftp://cache.test/f",
    ]  # fmt: skip
    document = sitemap(listed)
    assert sitemap_urls("https://cache.test/sitemap.xml", lambda _: document, limit=10) == [
        "https://cache.test/secure",
        "HTTPS://Cache.test:443/default-port",
    ]


def test_an_unreadable_child_is_reported_and_the_others_are_kept() -> None:
    documents = {
        f"{BASE}/index.xml": sitemap_index([f"{BASE}/{n}.xml" for n in range(3)]),
        f"{BASE}/0.xml": sitemap([f"{BASE}/p0"]),
        f"{BASE}/1.xml": b"<broken",
        f"{BASE}/2.xml": sitemap([f"{BASE}/p2"]),
    }
    failed: list[str] = []
    urls = sitemap_urls(
        f"{BASE}/index.xml", documents.__getitem__, 10, lambda url, _: failed.append(url)
    )
    assert (urls, failed) == ([f"{BASE}/p0", f"{BASE}/p2"], [f"{BASE}/1.xml"])
    with pytest.raises(SitemapError):  # without a callback the error is the caller's
        sitemap_urls(f"{BASE}/index.xml", documents.__getitem__, 10)


def test_the_limit_cuts_the_list() -> None:
    urls = [f"{BASE}/{n}" for n in range(10)]
    assert sitemap_urls(BASE, lambda _: sitemap(urls), limit=3) == urls[:3]


@pytest.mark.parametrize(
    ("document", "fragment"),
    [
        (b"<html><body>hi</body></html>", "not a sitemap"),
        (b"<urlset><url><loc>", "not well-formed"),
        (
            b'<?xml version="1.0"?><!DOCTYPE l [<!ENTITY a "aaaa">]><urlset>&a;</urlset>',
            "DTD",
        ),
        (b"\x1f\x8bnot really gzip", "not valid gzip"),
    ],
)
def test_bad_documents_are_refused(document: bytes, fragment: str) -> None:
    with pytest.raises(SitemapError, match=fragment):
        parse_sitemap(document)


BOMB = (
    '<?xml version="1.0" encoding="{encoding}"?>\n'
    '<!DOCTYPE urlset [<!ENTITY a "{chunk}">'
    '<!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">'
    '<!ENTITY c "&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;">'
    '<!ENTITY d "&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;">]>\n'
    "<urlset><url><loc>https://shop.test/&d;</loc></url></urlset>"
)


@pytest.mark.parametrize(
    ("encoding", "codec"),
    [
        ("UTF-8", "utf-8"),
        ("UTF-16", "utf-16"),
        ("UTF-16LE", "utf-16-le"),
        ("UTF-16BE", "utf-16-be"),
    ],
)
def test_a_dtd_is_refused_in_any_encoding(encoding: str, codec: str) -> None:
    """A 2.7 KB document whose <loc> would expand to about 1 MB; in UTF-16 no ASCII byte
    sequence ``<!DOCTYPE`` appears in it."""
    text = BOMB.format(encoding=encoding, chunk="x" * 1000)
    document = text.encode(codec)
    if codec == "utf-16-le":
        document = b"\xff\xfe" + document
    elif codec == "utf-16-be":
        document = b"\xfe\xff" + document
    if codec != "utf-8":
        assert b"<!DOCTYPE" not in document and b"<!ENTITY" not in document
    assert len(document) < 3000
    with pytest.raises(SitemapError, match="DTD"):
        parse_sitemap(document)


def test_an_external_entity_is_refused() -> None:
    document = (
        b'<?xml version="1.0"?><!DOCTYPE u SYSTEM "file:///etc/passwd">'
        b"<urlset><url><loc>https://shop.test/</loc></url></urlset>"
    )
    with pytest.raises(SitemapError, match="DTD"):
        parse_sitemap(document)
