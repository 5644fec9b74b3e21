"""Where a download may be redirected: public addresses, or the base URL's kind.

A server (or whoever controls it) can answer a download with a redirect to
any URL. Followed blindly, ``302 Location: http://169.254.169.254/...`` makes
the fetch ask a cloud machine's metadata service, and a redirect to
``localhost`` reaches services never meant to be exposed. So every hop of a
redirect is checked **after DNS**, on the addresses the host name resolves to
(which also catches every spelling of an address: decimal ``2852039166``,
octal ``0251.0376.0251.0376``, hex, short forms, IPv4-mapped IPv6 such as
``[::ffff:169.254.169.254]``, 6to4 and NAT64 embeddings):

* a **public** address is always allowed (cross-host redirects to mirrors,
  which the Internet Archive uses for every file);
* a **loopback, link-local, private, multicast, unspecified or reserved**
  address is allowed only when an address of the base URL is of the same
  kind (a mirror on a private network redirecting inside it, the loopback
  servers of the test suite); otherwise the redirect is refused before any
  connection to it, a typed failure that is not retried.

:func:`address_kind` and :func:`refusal` are the rule on resolved addresses;
:class:`RedirectGuard` applies it to each request of an ``httpx`` client.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Iterable

import httpx

__all__ = ["IPAddress", "RedirectGuard", "RedirectRefused", "address_kind", "refusal"]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
#: What each kind of address is, in the words of a refusal.
_WORDS = {
    "loopback": "a loopback address (this machine)",
    "link-local": "a link-local address (where cloud metadata services answer)",
    "private": "a private or reserved address (a local network)",
    "multicast": "a multicast address",
    "unspecified": "the unspecified address (this machine)",
}


class RedirectRefused(Exception):
    """A redirect to an address a download may not reach (the message says why)."""


def _embedded_v4(addr: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address carries (mapped, compatible, 6to4,
    NAT64, Teredo), or None."""
    if addr.ipv4_mapped is not None:
        return addr.ipv4_mapped
    if addr.sixtofour is not None:
        return addr.sixtofour
    if addr.teredo is not None:
        return addr.teredo[1]
    if addr in _NAT64 or (int(addr) >> 32 == 0 and int(addr) > 1):
        return ipaddress.IPv4Address(int(addr) & 0xFFFFFFFF)
    return None


def address_kind(addr: IPAddress) -> str | None:
    """The kind of a non-public address (``loopback``, ``link-local``,
    ``private``, ``multicast``, ``unspecified``), or None for a public one.

    Examples
    --------
    >>> from ipaddress import ip_address
    >>> [address_kind(ip_address(a)) for a in ("8.8.8.8", "169.254.169.254", "::ffff:127.0.0.1")]
    [None, 'link-local', 'loopback']
    """
    if isinstance(addr, ipaddress.IPv6Address):
        inner = _embedded_v4(addr)
        if inner is not None:
            kind = address_kind(inner)
            if kind is not None:
                return kind
    if addr.is_unspecified:
        return "unspecified"
    if addr.is_loopback:
        return "loopback"
    if addr.is_link_local:
        return "link-local"
    if addr.is_multicast:
        return "multicast"
    if addr.is_private or addr.is_reserved or not addr.is_global:
        return "private"
    return None


def refusal(base: Iterable[IPAddress], target: IPAddress) -> str | None:
    """Why a download whose base URL resolves to ``base`` may not be
    redirected to ``target``, or None when it may.

    Examples
    --------
    >>> from ipaddress import ip_address as ip
    >>> refusal([ip("127.0.0.1")], ip("127.0.0.1")) is None
    True
    >>> refusal([ip("93.184.215.14")], ip("127.0.0.1"))
    '127.0.0.1 is a loopback address (this machine)'
    """
    kind = address_kind(target)
    if kind is None or kind in {address_kind(b) for b in base}:
        return None
    return f"{target} is {_WORDS[kind]}"


async def _resolve(host: str, port: int) -> list[IPAddress]:
    """The addresses ``host`` resolves to (as a connection would resolve it)."""
    loop = asyncio.get_running_loop()
    infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [ipaddress.ip_address(str(info[4][0]).split("%", 1)[0]) for info in infos]


class RedirectGuard:
    """``httpx`` event hooks that keep requests to hosts other than the base
    URL's to the addresses :func:`refusal` allows.

    The request hook (the instance itself) resolves each such host before
    any connection and refuses a forbidden address; the response hook
    (:meth:`check_peer`) refuses an answer whose connection reached a
    forbidden address all the same (a name that resolved differently when
    connecting), before its body is read.

    Parameters
    ----------
    base_url : str
        The download root; requests to its host are never checked.
    """

    def __init__(self, base_url: str) -> None:
        self.base = httpx.URL(base_url)
        self._base_addrs: list[IPAddress] | None = None

    async def __call__(self, request: httpx.Request) -> None:
        url = request.url
        if url.host == self.base.host:
            return
        for addr in await self._addresses(url, request):
            await self._check(url, addr, request)

    async def check_peer(self, response: httpx.Response) -> None:
        """Refuse ``response`` when its connection reached a forbidden address."""
        url = response.url
        stream = response.extensions.get("network_stream")
        peer = None if stream is None else stream.get_extra_info("server_addr")
        if url.host == self.base.host or not peer:
            return
        addr = ipaddress.ip_address(str(peer[0]).split("%", 1)[0])
        await self._check(url, addr, response.request)

    async def _check(self, url: httpx.URL, addr: IPAddress, request: httpx.Request) -> None:
        if self._base_addrs is None:
            self._base_addrs = await self._addresses(self.base, request)
        why = refusal(self._base_addrs, addr)
        if why is not None:
            shown = str(url) if len(str(url)) <= 200 else str(url)[:200] + "..."
            raise RedirectRefused(
                f"refused a redirect to {shown}: {why}, the address of {url.host}; a "
                "download is redirected only to public addresses (or to addresses of the "
                "kind the base URL has)"
            )

    @staticmethod
    async def _addresses(url: httpx.URL, request: httpx.Request) -> list[IPAddress]:
        port = url.port or (443 if url.scheme == "https" else 80)
        try:
            return await _resolve(url.host, port)
        except (OSError, UnicodeError) as exc:
            raise httpx.ConnectError(f"cannot resolve {url.host}: {exc}", request=request) from None
