"""A TCP proxy in front of MySQL/MariaDB that counts what each connection asks: the
commands (COM_QUERY and the others) a client sends after logging in, per session,
keyed by the connection id of the server's greeting (the id a worker reports in
worker_ready). Bytes pass through unchanged.

    with QueryTap("127.0.0.1", 3306) as tap:   # listening on tap.port
        ...
        tap.commands(connection_id)   # [(command byte, first 200 characters of SQL), ...]

A command is a client packet with sequence number 0: the handshake response and
any authentication exchange carry higher ones, and so does the rest of a split
packet (16 MiB and over), so each round trip the client starts counts once.
"""
import socket
import struct
import threading

CHUNK = 65536
COM_QUERY = 0x03
SQL_SHOWN = 200


class QueryTap:
    def __init__(self, target_host, target_port):
        self.target = (target_host, target_port)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.lock = threading.Lock()
        self.sessions = {}   # connection id -> [(command, sql)]
        self.sockets = []
        self.closed = False

    def __enter__(self):
        threading.Thread(target=self._accept, daemon=True).start()
        return self

    def __exit__(self, *exc_info):
        self.closed = True
        self.listener.close()
        with self.lock:
            sockets, self.sockets = self.sockets, []
        for sock in sockets:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()

    def commands(self, connection_id):
        with self.lock:
            return list(self.sessions.get(connection_id, ()))

    def _accept(self):
        while not self.closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(self.target)
            for sock in (client, upstream):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self.lock:
                self.sockets += [client, upstream]
            session = Session(self._known)
            threading.Thread(target=self._pump, args=(upstream, client, session.from_server),
                             daemon=True).start()
            threading.Thread(target=self._pump, args=(client, upstream, session.from_client),
                             daemon=True).start()

    def _known(self, connection_id, commands):
        with self.lock:
            self.sessions[connection_id] = commands

    @staticmethod
    def _pump(source, sink, observe):
        try:
            while True:
                data = source.recv(CHUNK)
                if not data:
                    break
                observe(data)
                sink.sendall(data)
        except OSError:
            pass
        finally:
            try:
                sink.shutdown(socket.SHUT_WR)
            except OSError:
                pass


class Session:
    """One connection's two streams, cut into packets."""

    def __init__(self, on_greeting):
        self.commands = []   # shared with the tap once the greeting named the connection
        self.on_greeting = on_greeting
        self.server_bytes = b""
        self.client_bytes = b""
        self.greeted = False

    def from_server(self, data):
        if self.greeted:
            return
        self.server_bytes += data
        # The greeting: protocol version, NUL-terminated version text, connection id.
        if len(self.server_bytes) >= 4:
            length = int.from_bytes(self.server_bytes[:3], "little")
            if len(self.server_bytes) >= 4 + length:
                payload = self.server_bytes[4:4 + length]
                end = payload.index(b"\0", 1)
                (connection_id,) = struct.unpack("<I", payload[end + 1:end + 5])
                self.greeted = True
                self.on_greeting(connection_id, self.commands)

    def from_client(self, data):
        self.client_bytes += data
        while len(self.client_bytes) >= 4:
            length = int.from_bytes(self.client_bytes[:3], "little")
            if len(self.client_bytes) < 4 + length:
                return
            sequence = self.client_bytes[3]
            payload = self.client_bytes[4:4 + length]
            self.client_bytes = self.client_bytes[4 + length:]
            if sequence == 0 and payload:
                sql = payload[1:1 + SQL_SHOWN].decode("utf-8", "replace") \
                    if payload[0] == COM_QUERY else ""
                self.commands.append((payload[0], sql))
