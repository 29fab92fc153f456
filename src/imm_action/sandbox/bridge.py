"""Run inside the sandbox, in front of a command whose network is a list of hosts (issue 60,
decision 0070): the command has no network but the sandbox's own loopback, and this forwards a
port of it to imm's proxy, outside, through the unix socket bound in. The command gets that
port as its proxy (`HTTPS_PROXY`, `HTTP_PROXY`, `ALL_PROXY`, lower-case too) and no other
proxy setting: whatever the caller's environment held (a user's proxy URL with its password)
is dropped here too.

    python3 -I -S bridge.py SOCKET PORT -- COMMAND...

The standard library only, run by the sandbox's own Python: imm's package may be hidden. The
command is this process's child; its exit status is this process's."""

import os
import signal
import socket
import sys
import threading

_CHUNK = 1 << 16
_LOCAL = "localhost,127.0.0.1,::1"


def _pipe(source: socket.socket, target: socket.socket) -> None:
    try:
        while True:
            chunk = source.recv(_CHUNK)
            if not chunk:
                break
            target.sendall(chunk)
        target.shutdown(socket.SHUT_WR)
    except OSError:
        pass


def _forward(client: socket.socket, path: str) -> None:
    proxy = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        proxy.connect(path)
    except OSError:
        client.close()
        proxy.close()
        return
    back = threading.Thread(target=_pipe, args=(proxy, client), daemon=True)
    back.start()
    _pipe(client, proxy)
    back.join()
    client.close()
    proxy.close()


def _serve(listener: socket.socket, path: str) -> None:
    while True:
        try:
            client, _ = listener.accept()
        except OSError:
            return
        threading.Thread(target=_forward, args=(client, path), daemon=True).start()


def main(argv: list[str]) -> int:
    if len(argv) < 4 or argv[2] != "--":
        print("usage: bridge.py SOCKET PORT -- COMMAND...", file=sys.stderr)
        return 2
    path, port, command = argv[0], int(argv[1]), argv[3:]
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen(128)
    threading.Thread(target=_serve, args=(listener, path), daemon=True).start()
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
    for number in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(number, lambda sent, _frame: os.kill(child, sent))
    _, status = os.waitpid(child, 0)
    return (
        os.waitstatus_to_exitcode(status) % 256
        if os.WIFEXITED(status)
        else (128 + os.WTERMSIG(status))
    )


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
