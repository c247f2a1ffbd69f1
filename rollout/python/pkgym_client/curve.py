"""CURVE keys for pkgym's authenticated TCP endpoints (docs/security.md).

A server started with ``--curve-secret-key`` and ``--curve-allow`` admits only clients whose
public key the operator put in the allow directory. Make a key pair with ``pkgym keygen BASE``
(``BASE.key`` holds both keys, mode 0600; ``BASE.pub`` goes to the operator), then pass
``curve_server_key`` (the server's ``.pub``) and ``curve_client_key`` (your ``.key``) to a
client, or set ``PKGYM_CURVE_SERVER_KEY`` and ``PKGYM_CURVE_CLIENT_KEY`` to those paths.
"""
import os
import re
import stat

import zmq

_KEY_LINE = re.compile(r'^\s*(public|secret)-key\s*=\s*"([^"]{40})"\s*$')
_Z85 = re.compile(r"^[0-9a-zA-Z.\-:+=^!/*?&<>()\[\]{}@%$#]{40}$")


def load_key_file(path, need_secret=False):
    """(public, secret) from a key file (ZeroMQ certificate format, or a bare public key);
    secret is None when the file holds none. Both are 40-character Z85 bytes."""
    keys = {}
    with open(path) as f:
        text = f.read(65536)
    for line in text.splitlines():
        m = _KEY_LINE.match(line)
        if m and _Z85.match(m.group(2)):
            keys[m.group(1)] = m.group(2).encode()
        elif not keys and _Z85.match(line.strip()):
            keys["public"] = line.strip().encode()
    if "public" not in keys:
        raise ValueError(f"{path}: no public-key line (make one with pkgym keygen)")
    if need_secret:
        if "secret" not in keys:
            raise ValueError(f"{path} has no secret-key line: give the .key file, not the .pub")
        mode = stat.S_IMODE(os.stat(path).st_mode)
        if mode & 0o077:
            raise ValueError(f"secret key file {path} is readable by others ({mode:03o}): "
                             "chmod 600 it")
        if zmq.curve_public(keys["secret"]) != keys["public"]:
            raise ValueError(f"{path}: the public key does not belong to the secret key")
    return keys["public"], keys.get("secret")


def _as_key(value, what):
    if isinstance(value, str) and len(value) == 40 and _Z85.match(value):
        return value.encode()
    if isinstance(value, bytes) and len(value) == 40:
        return value
    raise ValueError(f"{what}: expected a key file path or a 40-character Z85 key")


def resolve(server_key=None, client_key=None):
    """The (server_public, client_public, client_secret) to use, or None for no CURVE.
    Arguments left None come from PKGYM_CURVE_SERVER_KEY / PKGYM_CURVE_CLIENT_KEY."""
    if server_key is None and client_key is None:
        server_key = os.environ.get("PKGYM_CURVE_SERVER_KEY") or None
        client_key = os.environ.get("PKGYM_CURVE_CLIENT_KEY") or None
    if server_key is None and client_key is None:
        return None
    if server_key is None or client_key is None:
        raise ValueError("CURVE needs both the server's public key (curve_server_key or "
                         "PKGYM_CURVE_SERVER_KEY) and this client's key pair (curve_client_key "
                         "or PKGYM_CURVE_CLIENT_KEY)")
    if not zmq.has("curve"):
        raise RuntimeError("this libzmq has no CURVE support")
    if isinstance(server_key, (str, os.PathLike)) and os.path.exists(server_key):
        server_public = load_key_file(server_key)[0]
    else:
        server_public = _as_key(server_key, "curve_server_key")
    if isinstance(client_key, (tuple, list)):
        public, secret = (_as_key(k, "curve_client_key") for k in client_key)
    else:
        public, secret = load_key_file(client_key, need_secret=True)
    return server_public, public, secret


def apply(sock, keys):
    """Makes sock (not yet connected) a CURVE client with keys from resolve()."""
    if keys is None:
        return
    server_public, public, secret = keys
    sock.curve_serverkey = server_public
    sock.curve_publickey = public
    sock.curve_secretkey = secret


class AuthenticationError(ConnectionError):
    """The server refused this client's handshake (key not authorized, or CURVE mismatch)."""


_FAILED = (zmq.EVENT_HANDSHAKE_FAILED_AUTH | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL
           | zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL)


class HandshakeWatch:
    """Turns a refused handshake on a tcp:// endpoint into AuthenticationError at once, instead
    of a silent wait until the timeout (ZeroMQ would keep retrying in the background)."""

    def __init__(self, sock, endpoint, keys):
        self._sock = sock
        self._keys = keys
        self._endpoint = endpoint
        self._mon = sock.get_monitor_socket(_FAILED) if endpoint.startswith("tcp://") else None

    def _raise_if_failed(self):
        from zmq.utils.monitor import recv_monitor_message
        while self._mon is not None and self._mon.poll(0):
            ev = recv_monitor_message(self._mon)
            if ev["event"] == zmq.EVENT_HANDSHAKE_FAILED_AUTH:
                raise AuthenticationError(
                    f"{self._endpoint} refused this client's CURVE key (ZAP status "
                    f"{int(ev['value'])}): the operator must add its .pub to the server's "
                    "--curve-allow directory")
            if ev["event"] & _FAILED:
                raise AuthenticationError(
                    f"the handshake with {self._endpoint} failed: " +
                    ("is curve_server_key this server's public key, and does it use CURVE?"
                     if self._keys else
                     "the server probably requires CURVE: pass curve_server_key and "
                     "curve_client_key (or set PKGYM_CURVE_SERVER_KEY and PKGYM_CURVE_CLIENT_KEY)"))

    def wait(self, timeout_ms):
        """True when the socket has a message, False at the timeout; raises
        AuthenticationError on a failed handshake."""
        if self._mon is None:
            return bool(self._sock.poll(timeout_ms))
        poller = zmq.Poller()
        poller.register(self._sock, zmq.POLLIN)
        poller.register(self._mon, zmq.POLLIN)
        ready = dict(poller.poll(timeout_ms))
        self._raise_if_failed()
        return self._sock in ready

    def check(self):
        self._raise_if_failed()

    def close(self):
        if self._mon is not None:
            try:
                self._sock.disable_monitor()
            except zmq.ZMQError:
                pass
            self._mon.close(0)
            self._mon = None


def connect_dealer(ctx, endpoint, server_key=None, client_key=None):
    """The clients' socket: a DEALER on ctx connected to endpoint, a CURVE client when keys
    resolve (resolve()), and its HandshakeWatch. Returns (socket, watch)."""
    keys = resolve(server_key, client_key)
    sock = ctx.socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    apply(sock, keys)
    watch = HandshakeWatch(sock, endpoint, keys)
    sock.connect(endpoint)
    return sock, watch
