"""A small SOCKS5 proxy (RFC 1928, with RFC 1929 user/password) for the tests: it records
what each client asked for and relays the bytes. Names ending in .invalid resolve to
127.0.0.1, so a test can tell a name the proxy resolved (socks5h) from an address."""
import select
import socket
import socketserver
import struct
import threading


def relay(client, upstream, idle=30):
    """Copies bytes both ways until one side closes or both are idle; closes upstream."""
    pair = {client: upstream, upstream: client}
    try:
        while True:
            ready, _, _ = select.select(list(pair), [], [], idle)
            if not ready:
                return
            for s in ready:
                data = s.recv(65536)
                if not data:
                    return
                pair[s].sendall(data)
    except OSError:
        pass
    finally:
        upstream.close()


class _Handler(socketserver.BaseRequestHandler):
    def _read(self, n):
        data = b""
        while len(data) < n:
            chunk = self.request.recv(n - len(data))
            if not chunk:
                raise ConnectionError("closed")
            data += chunk
        return data

    def handle(self):
        server = self.server
        try:
            version, count = self._read(2)
            methods = self._read(count)
            if version != 5:
                return
            want = 2 if server.credentials else 0
            if want not in methods:
                self.request.sendall(b"\x05\xff")
                return
            self.request.sendall(bytes([5, want]))
            user = None
            if want == 2:
                _, ulen = self._read(2)
                user = self._read(ulen).decode()
                (plen,) = self._read(1)
                password = self._read(plen).decode()
                ok = (user, password) == server.credentials
                self.request.sendall(b"\x01\x00" if ok else b"\x01\x01")
                if not ok:
                    return
            _, command, _, atyp = self._read(4)
            if atyp == 1:
                host = socket.inet_ntoa(self._read(4))
            elif atyp == 3:
                (n,) = self._read(1)
                host = self._read(n).decode()
            elif atyp == 4:
                host = socket.inet_ntop(socket.AF_INET6, self._read(16))
            else:
                return
            (port,) = struct.unpack("!H", self._read(2))
            with server.lock:
                server.seen.append({"command": command, "atyp": {1: "ipv4", 3: "name", 4: "ipv6"}[atyp],
                                    "host": host, "port": port, "user": user})
            if command != 1:
                self.request.sendall(b"\x05\x07\x00\x01" + bytes(6))
                return
            target = "127.0.0.1" if host.endswith(".invalid") else host
            try:
                upstream = socket.create_connection((target, port), timeout=10)
            except OSError:
                self.request.sendall(b"\x05\x05\x00\x01" + bytes(6))
                return
            self.request.sendall(b"\x05\x00\x00\x01" + socket.inet_aton("127.0.0.1") + struct.pack("!H", port))
            self._relay(upstream)
        except (ConnectionError, OSError, ValueError):
            pass

    def _relay(self, upstream):
        relay(self.request, upstream)


class Socks5Server(socketserver.ThreadingTCPServer):
    """Socks5Server(credentials=None | (user, password)); .port, .seen; start(), stop()."""
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, credentials=None):
        super().__init__(("127.0.0.1", 0), _Handler)
        self.credentials = credentials
        self.seen = []
        self.lock = threading.Lock()
        self.port = self.server_address[1]

    def start(self):
        threading.Thread(target=self.serve_forever, daemon=True).start()
        return self

    def stop(self):
        self.shutdown()
        self.server_close()
