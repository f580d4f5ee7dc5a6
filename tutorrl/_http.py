"""HTTP requests bounded in total time, from the connect to the last header.

A socket timeout bounds each read, not their sum, and ``read_stream``'s
``within`` starts at the body: a server that answers ``100 Continue`` without
end, or sends its status line and headers a byte at a time just inside the
timeout, would hold ``urlopen`` for as long as it likes. The connections made
here shut their socket down once the whole exchange has taken longer than
``total`` seconds (plus a moment, so that ``read_stream`` names a slow body
itself), and a response that was cut is reported as such.

A request that carries credentials (an ``Authorization`` header) never follows
a redirect: urllib copies every header but the content ones onto the new
request, so a 302 to another host would hand it the token. The redirect
answer itself comes back as an ``HTTPError`` (3xx) for the caller to name.
"""

from __future__ import annotations

import http.client
import socket
import threading
import urllib.request

# read_stream's own deadline fires first on a slow body; the cut is the backstop.
_GRACE = 1.0


class _Deadline:
    """Mixin for an ``http.client`` connection: cut after ``total`` seconds."""

    total = 10.0

    def connect(self) -> None:
        super().connect()
        sock, cut = self.sock, threading.Event()
        self._cut = cut

        def shut() -> None:
            cut.set()
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:  # already closed: the exchange ended in time
                pass

        timer = threading.Timer(self.total + _GRACE, shut)
        timer.daemon = True
        timer.start()
        self._timer = timer

    def getresponse(self):
        cut = getattr(self, "_cut", None)
        try:
            response = super().getresponse()
        except (OSError, http.client.HTTPException):
            if cut is not None and cut.is_set():
                raise TimeoutError(f"no complete answer within {self.total:.3g} s") from None
            raise
        if cut is not None and cut.is_set():  # a head cut short can still parse (a partial last header)
            response.close()
            raise TimeoutError(f"no complete answer within {self.total:.3g} s")
        return response

    def close(self) -> None:
        timer = getattr(self, "_timer", None)
        if timer is not None:
            timer.cancel()
        super().close()


def _bounded(connection: type, total: float) -> type:
    return type(f"Bounded{connection.__name__}", (_Deadline, connection), {"total": total})


class _BoundedOpen:
    """Mixed into urllib's HTTP and HTTPS handlers: each connection gets the total deadline."""

    def __init__(self, total: float):
        super().__init__()
        self.total = total

    def do_open(self, http_class, req, **kwargs):
        return super().do_open(_bounded(http_class, self.total), req, **kwargs)


class _HTTPHandler(_BoundedOpen, urllib.request.HTTPHandler):
    pass


class _HTTPSHandler(_BoundedOpen, urllib.request.HTTPSHandler):
    pass


class _CredentialsStay(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, req, fp, code, msg, headers, newurl):
        if req.has_header("Authorization"):
            return None  # urllib then raises the 3xx as an HTTPError
        return super().redirect_request(req, fp, code, msg, headers, newurl)


def open_bounded(req: urllib.request.Request, total: float, *handlers: urllib.request.BaseHandler):
    """``urlopen(req, timeout=total)`` whose headers, too, must arrive within ``total`` seconds.

    ``handlers`` are added to the opener (e.g. ``ProxyHandler({})``).
    """
    opener = urllib.request.build_opener(*handlers, _HTTPHandler(total), _HTTPSHandler(total), _CredentialsStay())
    return opener.open(req, timeout=total)
