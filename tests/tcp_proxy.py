"""A small TCP proxy on 127.0.0.1 that can cut its link and restore it: a network
partition between a client and its database, made without privileges.

In process (threads):

    from tcp_proxy import TcpProxy

    with TcpProxy("127.0.0.1", server_port) as proxy:   # listening on proxy.port
        dsn = f"mysql://root@127.0.0.1:{proxy.port}/jobs"
        proxy.cut()        # every connection is reset, new ones are refused
        proxy.restore()    # listening again on the same port
        proxy.stall()      # nothing moves, nothing is reset: a host that vanished
        proxy.resume()     # what waited is delivered, as TCP retransmits after a blip
        proxy.stats        # {"accepted": .., "dropped": .., "upstream_failed": ..}

As a subprocess (prints the port on its first line; SIGUSR1 cuts, SIGUSR2
restores, SIGTERM ends it; stalls are for the in-process proxy):

    python tests/tcp_proxy.py --target 127.0.0.1:3306 [--listen 127.0.0.1:0]

A cut resets both ends of every open connection (RST, as a router that lost
its state would), so clients see "lost connection" at once and the server
rolls back what they had open; while cut, the port refuses connections
(nothing listens on it). A stall is the other kind of partition: no packet
gets through and nobody is told, so each end waits on its own timeouts (the
server on wait_timeout, for hours); new connections wait for a greeting that
does not come. Each connection is two pump threads with blocking sockets; a
cut wakes them by shutting their sockets down.
"""
import argparse
import signal
import socket
import struct
import sys
import threading

ACCEPT_POLL = 0.1          # seconds; the accept loop looks at its stop flag this often
CHUNK = 65536


class TcpProxy:
    def __init__(self, target_host, target_port, listen_host="127.0.0.1", listen_port=0,
                 connect_timeout=5.0):
        self.target = (target_host, target_port)
        self.listen_host = listen_host
        self.port = listen_port
        self.connect_timeout = connect_timeout
        self.lock = threading.Lock()
        self.pairs = set()             # (client socket, upstream socket) of open links
        self.listener = None
        self.accept_thread = None
        self.stop_accepting = threading.Event()
        self.is_cut = False
        self.flowing = threading.Event()   # cleared while stalled
        self.flowing.set()
        self.stats = {"accepted": 0, "dropped": 0, "upstream_failed": 0}

    # -- life cycle -------------------------------------------------------------

    def start(self):
        self._listen()
        return self

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc_info):
        self.close()

    def cut(self):
        """Reset every open connection and stop listening until restore()."""
        with self.lock:
            self.is_cut = True
        self._stop_listening()
        with self.lock:
            pairs, self.pairs = list(self.pairs), set()
        for pair in pairs:
            for sock in pair:
                _reset(sock)
        self.stats["dropped"] += len(pairs)
        return len(pairs)

    def restore(self):
        """Listen again on the same port; new connections reach the target again."""
        with self.lock:
            self.is_cut = False
        self._listen()

    def stall(self):
        """Stop moving bytes in either direction, resetting nothing, until resume()."""
        self.flowing.clear()

    def resume(self):
        self.flowing.set()

    def close(self):
        self.flowing.set()
        self.cut()

    # -- internals ----------------------------------------------------------------

    def _listen(self):
        if self.accept_thread is not None:
            return
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((self.listen_host, self.port))
        listener.listen(128)
        listener.settimeout(ACCEPT_POLL)
        self.port = listener.getsockname()[1]      # the same port after a restore
        self.listener = listener
        self.stop_accepting = threading.Event()
        self.accept_thread = threading.Thread(target=self._accept_loop,
                                              args=(listener, self.stop_accepting),
                                              name="proxy-accept", daemon=True)
        self.accept_thread.start()

    def _stop_listening(self):
        thread, self.accept_thread = self.accept_thread, None
        if thread is None:
            return
        self.stop_accepting.set()
        thread.join()
        self.listener.close()
        self.listener = None

    def _accept_loop(self, listener, stop):
        while not stop.is_set():
            if not self.flowing.is_set():   # stalled: connections wait in the backlog
                self.flowing.wait(ACCEPT_POLL)
                continue
            try:
                client, _ = listener.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            client.settimeout(None)
            try:
                upstream = socket.create_connection(self.target, timeout=self.connect_timeout)
                upstream.settimeout(None)
            except OSError:
                self.stats["upstream_failed"] += 1
                _reset(client)
                continue
            pair = (client, upstream)
            with self.lock:
                if self.is_cut:            # cut while we were connecting
                    _reset(client)
                    _reset(upstream)
                    continue
                self.pairs.add(pair)
                self.stats["accepted"] += 1
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(source, sink, pair),
                                 name="proxy-pump", daemon=True).start()

    def _pump(self, source, sink, pair):
        try:
            while True:
                self.flowing.wait()
                data = source.recv(CHUNK)
                if not data:
                    break
                self.flowing.wait()   # what was read as the stall began waits too
                sink.sendall(data)
        except OSError:
            pass
        # One side ended (or a cut reset it): end the other side too.
        with self.lock:
            mine = pair in self.pairs
            self.pairs.discard(pair)
        if mine:
            for sock in pair:
                _close(sock)


def _reset(sock):
    """Abort a connection: RST to the peer, and wake any thread blocked on it."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    except OSError:
        pass
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    _close(sock)


def _close(sock):
    try:
        sock.close()
    except OSError:
        pass


def _address(text):
    host, _, port = text.rpartition(":")
    return host or "127.0.0.1", int(port)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--target", required=True, help="HOST:PORT to forward to")
    parser.add_argument("--listen", default="127.0.0.1:0", help="HOST:PORT to listen on")
    args = parser.parse_args(argv)
    target, listen = _address(args.target), _address(args.listen)
    proxy = TcpProxy(*target, listen_host=listen[0], listen_port=listen[1]).start()
    requests = []
    wake = threading.Event()

    def record(signum, frame):
        requests.append(signum)
        wake.set()

    for signum in (signal.SIGUSR1, signal.SIGUSR2, signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, record)
    print(proxy.port, flush=True)
    while True:
        wake.wait(1.0)
        wake.clear()
        while requests:
            signum = requests.pop(0)
            if signum == signal.SIGUSR1:
                proxy.cut()
            elif signum == signal.SIGUSR2:
                proxy.restore()
            else:
                proxy.close()
                return 0


if __name__ == "__main__":
    sys.exit(main())
