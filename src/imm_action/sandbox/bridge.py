"""Run inside the sandbox, in front of a command whose network is a list of hosts (issue 60,
decision 0070): the command has no network but the sandbox's own loopback, and this forwards a
port of it to imm's proxy, outside, through the unix socket bound in. The command gets that
port as its proxy (`HTTPS_PROXY`, `HTTP_PROXY`, `ALL_PROXY`, lower-case too) and no other
proxy setting: whatever the caller's environment held (a user's proxy URL with its password)
is dropped here too.

    python3 -I -S bridge.py SOCKET PORT -- COMMAND...

The standard library only, run by the sandbox's own Python: imm's package may be hidden. The
command is this process's child; its exit status is this process's."""

import _signal  # type: ignore[import-not-found]  # C modules: `socket`, `threading`, `signal` tripled its start
import _socket
import _thread
import os
import sys

_CHUNK = 1 << 16
_LOCAL = "localhost,127.0.0.1,::1"


def _pipe(source: _socket.socket, target: _socket.socket, done: _thread.LockType) -> None:
    try:
        while True:
            chunk = source.recv(_CHUNK)
            if not chunk:
                break
            target.sendall(chunk)
        target.shutdown(_socket.SHUT_WR)
    except OSError:
        pass
    finally:
        done.release()


def _forward(client: _socket.socket, path: str) -> None:
    proxy = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        proxy.connect(path)
    except OSError:
        client.close()
        proxy.close()
        return
    back = _thread.allocate_lock()
    back.acquire()
    _thread.start_new_thread(_pipe, (proxy, client, back))
    forth = _thread.allocate_lock()
    forth.acquire()
    _pipe(client, proxy, forth)
    back.acquire()  # released when the other direction ends
    client.close()
    proxy.close()


def _serve(listener: _socket.socket, path: str) -> None:
    while True:
        try:
            fd, _ = listener._accept()  # type: ignore[attr-defined]  # the C socket's accept
        except OSError:
            return
        _thread.start_new_thread(_forward, (_socket.socket(fileno=fd), path))


def main(argv: list[str]) -> int:
    if len(argv) < 4 or argv[2] != "--":
        print("usage: bridge.py SOCKET PORT -- COMMAND...", file=sys.stderr)
        return 2
    path, port, command = argv[0], int(argv[1]), argv[3:]
    listener = _socket.socket(_socket.AF_INET, _socket.SOCK_STREAM)
    listener.setsockopt(_socket.SOL_SOCKET, _socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen(128)
    _thread.start_new_thread(_serve, (listener, path))
    proxy = f"http://127.0.0.1:{port}"
    env = {name: value for name, value in os.environ.items() if "proxy" not in name.lower()}
    for name in ("HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY"):
        env[name] = env[name.lower()] = proxy
    env["NO_PROXY"] = env["no_proxy"] = _LOCAL
    child = os.fork()  # not subprocess: its import is a third of this script's start
    if child == 0:
        try:
            os.execvpe(command[0], command, env)
        except OSError as error:
            os.write(2, f"bridge.py: {command[0]}: {error.strerror}\n".encode())
        os._exit(127)
    for number in (_signal.SIGTERM, _signal.SIGINT, _signal.SIGHUP):
        _signal.signal(number, lambda sent, _frame: os.kill(child, sent))
    code = os.waitstatus_to_exitcode(os.waitpid(child, 0)[1])
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
