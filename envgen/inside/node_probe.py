"""What one node of a job looks like from the inside, and whether a TCP port opens between two.

Run by `envgen preflight` on each node (program text on stdin: ``python - SUBCOMMAND ...``;
nothing here reads ``__file__``). Standard library only, Python >= 3.8. Each subcommand prints
JSON lines and never raises: every probe catches its own errors and reports them as a field.

- ``facts --names a,b,c [--port P]``: one JSON object — host name and FQDN, what each name
  (and this node's own host name) resolves to, every address on this node's interfaces, the
  interfaces (up, loopback, IPv4 and IPv6 with prefix length), /dev/shm's size, the memlock
  limit, the usable CPUs, the launcher/NCCL/Gloo/Slurm variables, ``nvidia-smi``'s GPU list,
  the count of /dev/nvidiaN, ``hostname -I`` (the command DeepSpeed's runner asks the first
  host for its master address), the PATH this session was given and what ``python``,
  ``python3``, ``ninja`` and ``deepspeed`` are on it (an SSH session runs no login shell: this
  is the launcher's view, not the one of a user who logs in), the open-files limit, the
  ephemeral port range, and with ``--port`` whether 0.0.0.0:P can be bound (and, when it
  cannot, which process holds it — a listener, or an outgoing connection whose local port it
  is — read from /proc where readable).
- ``listen --port P --seconds S [--expect N]``: binds 0.0.0.0:P (P 0: a port the kernel picks
  from the ephemeral range, as gloo's and NCCL's listeners get); first line says whether it
  listens (exit 1 and the holder when not); accepts for S seconds or N connections, echoing the
  handshake line ``envgen-preflight`` to each peer that sends it; last line names the peers.
- ``reach --targets H:P,H:P --timeout T``: ``connect`` to each target at once; one JSON
  object ``{"reach": [...]}`` (the pairwise check: which node's port does not let whom in).
- ``connect --host H --port P [--source ADDR] --timeout T``: one JSON object — resolves H,
  binds ADDR first when given, connects, sends the handshake and waits briefly for the echo. A
  port that accepts but does not answer the handshake is still ``ok`` (``handshake`` false).
  Failures are classified: ``resolve`` (getaddrinfo failed), ``bind`` (ADDR cannot be bound),
  ``refused`` (ECONNREFUSED), ``timeout`` (no answer within T), ``unreachable``
  (EHOSTUNREACH/ENETUNREACH), ``other``.

Interfaces: ``ip -j addr`` (iproute2's JSON) first, because it lists every address of an
interface; the fallback — ``socket.if_nameindex()`` with the SIOCGIFFLAGS/SIOCGIFADDR/
SIOCGIFNETMASK ioctls for IPv4 and /proc/net/if_inet6 for IPv6 — sees only an interface's
primary IPv4 address (SIOCGIFADDR returns one address; secondary addresses added with
``ip addr add`` are invisible to it), which is enough where iproute2 is not installed.
"""

from __future__ import annotations

import argparse
import errno
import json
import os
import re
import shutil
import socket
import struct
import subprocess
import sys
import threading
import time

SCHEMA = 1
HANDSHAKE = b"envgen-preflight\n"
ENV_PREFIXES = ("NCCL_", "GLOO_", "SLURM_")
ENV_NAMES = ("TP_SOCKET_IFNAME", "MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK",
             "LOCAL_RANK", "NNODES", "NPROC_PER_NODE", "CUDA_VISIBLE_DEVICES",
             "ENVGEN_LOCK_HASH")
NVIDIA_SMI_ARGS = ("--query-gpu=name,compute_cap,driver_version", "--format=csv,noheader")
NVIDIA_SMI_SECONDS = 20
# <linux/sockios.h>; <net/if.h> for the flags
SIOCGIFFLAGS, SIOCGIFADDR, SIOCGIFNETMASK = 0x8913, 0x8915, 0x891B
IFF_UP, IFF_LOOPBACK = 0x1, 0x8
TCP_LISTEN = "0A"  # st column of /proc/net/tcp (include/net/tcp_states.h: TCP_LISTEN = 10)


def emit(obj: dict) -> None:
    sys.stdout.write(json.dumps(obj, sort_keys=True) + "\n")
    sys.stdout.flush()


def alive() -> None:
    """Write an empty line (readers skip it); end the process when nobody reads any more: ssh
    gone means the preflight gave up on us, and the port must not stay taken after it."""
    try:
        sys.stdout.write("\n")
        sys.stdout.flush()
    except OSError:  # BrokenPipeError: Python ignores SIGPIPE and raises instead
        os._exit(4)


def err_text(exc: BaseException) -> str:
    text = str(exc)
    return text if text else type(exc).__name__


# ---------------------------------------------------------------- names and addresses


def resolve(name: str) -> dict:
    """Every address ``name`` resolves to: unique, IPv4 first, otherwise getaddrinfo's order."""
    try:
        infos = socket.getaddrinfo(name, None, 0, socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:
        return {"addresses": [], "error": err_text(exc)}
    seen = []  # type: list
    for family in (socket.AF_INET, socket.AF_INET6):
        for fam, _type, _proto, _canon, sockaddr in infos:
            if fam == family and sockaddr[0] not in seen:
                seen.append(sockaddr[0])
    return {"addresses": seen, "error": None}


def _interfaces_ip() -> dict:
    out = subprocess.run(["ip", "-j", "addr"], capture_output=True, timeout=10,
                         check=True).stdout
    result = {}
    for link in json.loads(out.decode("utf-8", "replace")):
        flags = link.get("flags") or []
        entry = {"up": "UP" in flags,
                 "loopback": "LOOPBACK" in flags or link.get("link_type") == "loopback",
                 "ipv4": [], "ipv6": []}
        for info in link.get("addr_info") or []:
            family = {"inet": "ipv4", "inet6": "ipv6"}.get(info.get("family"))
            if family and info.get("local"):
                entry[family].append(f"{info['local']}/{info.get('prefixlen')}")
        result[link["ifname"]] = entry
    return result


def _ioctl(sock, request: int, name: str) -> bytes:
    import fcntl

    return fcntl.ioctl(sock.fileno(), request, struct.pack("256s", name[:15].encode()))


def _prefix_len(mask: bytes) -> int:
    return bin(int.from_bytes(mask, "big")).count("1")


def _interfaces_ioctl() -> dict:
    result = {}
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        for _index, name in socket.if_nameindex():
            entry = {"up": None, "loopback": name == "lo", "ipv4": [], "ipv6": []}
            try:
                flags = struct.unpack("H", _ioctl(sock, SIOCGIFFLAGS, name)[16:18])[0]
                entry["up"] = bool(flags & IFF_UP)
                entry["loopback"] = bool(flags & IFF_LOOPBACK)
            except OSError:
                pass
            try:
                address = socket.inet_ntoa(_ioctl(sock, SIOCGIFADDR, name)[20:24])
                mask = _ioctl(sock, SIOCGIFNETMASK, name)[20:24]
                entry["ipv4"].append(f"{address}/{_prefix_len(mask)}")
            except OSError:  # EADDRNOTAVAIL: no IPv4 address
                pass
            result[name] = entry
    finally:
        sock.close()
    try:
        with open("/proc/net/if_inet6") as f:
            lines = f.read().splitlines()
    except OSError:
        lines = []
    for line in lines:
        parts = line.split()
        if len(parts) < 6:
            continue
        address = socket.inet_ntop(socket.AF_INET6, bytes.fromhex(parts[0]))
        entry = result.setdefault(parts[5], {"up": None, "loopback": parts[5] == "lo",
                                             "ipv4": [], "ipv6": []})
        entry["ipv6"].append(f"{address}/{int(parts[2], 16)}")
    return result


def interfaces() -> tuple:
    """(interfaces, how they were read, error or None)."""
    errors = []
    if shutil.which("ip"):
        try:
            return _interfaces_ip(), "ip -j addr", None
        except Exception as exc:  # an old iproute2 without -j, or no JSON
            errors.append("ip -j addr: " + err_text(exc))
    try:
        return _interfaces_ioctl(), "ioctl", ("; ".join(errors) or None)
    except Exception as exc:
        errors.append("ioctl: " + err_text(exc))
        return {}, None, "; ".join(errors)


# ---------------------------------------------------------------- ports and their holders


TCP_ESTABLISHED = "01"


def _hex_address(text: str) -> str:
    """``0100007F:1F90`` (a /proc/net/tcp address, host byte order per 32-bit word) →
    ``127.0.0.1:8080``; IPv6 in brackets."""
    addr, port = text.split(":")
    raw = bytes.fromhex(addr)
    words = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
    if len(words) == 4:
        return f"{socket.inet_ntop(socket.AF_INET, words)}:{int(port, 16)}"
    return f"[{socket.inet_ntop(socket.AF_INET6, words)}]:{int(port, 16)}"


def _port_sockets(port: int) -> list:
    """(inode, state, remote address) of the sockets whose local port is ``port``: LISTEN
    first, then bound-but-unconnected ones, then connections (an outgoing connection that
    the kernel gave ``port`` as its local port holds it too)."""
    listening, bound, connected = [], [], []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                rows = f.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            cols = row.split()
            if len(cols) < 10 or ":" not in cols[1]:
                continue
            if int(cols[1].rsplit(":", 1)[1], 16) != port:
                continue
            if cols[3] == TCP_LISTEN:
                listening.append((cols[9], "listening", None))
            elif set(cols[2].replace(":", "")) == {"0"}:  # bound, not connected
                bound.append((cols[9], "bound", None))
            else:
                try:
                    remote = _hex_address(cols[2])
                except (ValueError, OSError):
                    remote = None
                state = "connected" if cols[3] == TCP_ESTABLISHED else "connection"
                connected.append((cols[9], state, remote))
    return listening + bound + connected


def _listen_inodes(port: int) -> list:
    """Inodes of the sockets bound to ``port`` (LISTEN first) in /proc/net/tcp and tcp6."""
    return [i for i, _state, _remote in _port_sockets(port) if i != "0"]


def port_owner(port: int) -> dict:
    """What holds ``port``: {"how": listening | bound | connected | connection, "remote": the
    peer of a connection, "pid", "cmd"}; {} when /proc shows no socket on it."""
    try:
        found = _port_sockets(port)
    except Exception:
        return {}
    if not found:
        return {}
    inode, how, remote = found[0]
    out = {"how": how, "remote": remote, "pid": None, "cmd": None}
    if inode == "0":  # TIME_WAIT and the like: no process owns it any more
        out["how"] = "closing connection"
        return out
    holder = port_holder(port, inodes=[inode])
    if holder and holder.startswith("pid "):
        pid, _, cmd = holder[4:].partition(": ")
        out["pid"], out["cmd"] = int(pid), cmd
    return out


def port_holder(port: int, inodes=None):
    """``"pid N: cmdline"`` of the process holding ``port``, best effort (None if unreadable)."""
    try:
        inodes = inodes if inodes is not None else _listen_inodes(port)
        if not inodes:
            return None
        targets = {f"socket:[{i}]" for i in inodes}
        for pid in sorted((p for p in os.listdir("/proc") if p.isdigit()), key=int):
            fd_dir = f"/proc/{pid}/fd"
            try:
                fds = os.listdir(fd_dir)
            except OSError:
                continue
            for fd in fds:
                try:
                    if os.readlink(os.path.join(fd_dir, fd)) not in targets:
                        continue
                except OSError:
                    continue
                try:
                    with open(f"/proc/{pid}/cmdline", "rb") as f:
                        cmd = f.read().replace(b"\0", b" ").decode("utf-8", "replace").strip()
                except OSError:
                    cmd = ""
                return f"pid {pid}: {cmd[:300] or '?'}"
        return f"socket inode {inodes[0]} (its process is not readable here)"
    except Exception:
        return None


def _bind(port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("0.0.0.0", port))
    except BaseException:
        sock.close()
        raise
    return sock


def port_check(port: int) -> dict:
    try:
        _bind(port).close()
    except OSError as exc:
        holder = port_holder(port) if exc.errno == errno.EADDRINUSE else None
        owner = port_owner(port) if exc.errno == errno.EADDRINUSE else {}
        return {"port": port, "free": False, "error": err_text(exc), "holder": holder,
                "owner": owner}
    except Exception as exc:  # OverflowError: port out of range
        return {"port": port, "free": False, "error": err_text(exc), "holder": None}
    return {"port": port, "free": True, "error": None, "holder": None}


# ---------------------------------------------------------------- facts


def _shm() -> object:
    try:
        st = os.statvfs("/dev/shm")
    except OSError:
        return None
    return {"path": "/dev/shm", "total_bytes": st.f_blocks * st.f_frsize,
            "free_bytes": st.f_bavail * st.f_frsize}


def _memlock() -> object:
    try:
        import resource

        soft, hard = resource.getrlimit(resource.RLIMIT_MEMLOCK)
    except Exception:
        return None

    def show(v: int) -> object:
        return "unlimited" if v == resource.RLIM_INFINITY else v

    return {"soft": show(soft), "hard": show(hard)}


def _nofile() -> object:
    try:
        import resource

        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    except Exception:
        return None

    def show(v: int) -> object:
        return "unlimited" if v == resource.RLIM_INFINITY else v

    return {"soft": show(soft), "hard": show(hard)}


def _port_range() -> object:
    """The kernel's ephemeral port range (ports it hands to outgoing connections and to
    ``bind(port 0)``): /proc/sys/net/ipv4/ip_local_port_range."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low, high = f.read().split()[:2]
        return [int(low), int(high)]
    except (OSError, ValueError):
        return None


HOSTNAME_I_SECONDS = 5
TOOLS = ("python", "python3", "ninja", "deepspeed", "pdsh", "torchrun")


def _hostname_i() -> dict:
    """``hostname -I`` as DeepSpeed's runner runs it on the first host (its master address is
    the first word)."""
    out = {"rc": None, "stdout": "", "error": None}
    path = shutil.which("hostname")
    if not path:
        out["error"] = "hostname: command not found"
        return out
    try:
        proc = subprocess.run([path, "-I"], capture_output=True, timeout=HOSTNAME_I_SECONDS)
    except subprocess.TimeoutExpired:
        out["error"] = f"hostname -I did not answer in {HOSTNAME_I_SECONDS} s"
        return out
    except OSError as exc:
        out["error"] = err_text(exc)
        return out
    out["rc"] = proc.returncode
    out["stdout"] = proc.stdout.decode("utf-8", "replace")[:4000]
    if proc.returncode != 0:
        out["error"] = proc.stderr.decode("utf-8", "replace").strip()[-500:] or None
    return out


def _session() -> dict:
    """The PATH this process was given and what the launcher's commands find on it; the
    interpreter's own folder and which of the tools it holds."""
    here = os.path.dirname(sys.executable or "")
    return {"path": os.environ.get("PATH"), "executable": sys.executable,
            "shell": os.environ.get("SHELL"),
            "which": {t: shutil.which(t) for t in TOOLS},
            "beside_python": {t: os.path.exists(os.path.join(here, t)) for t in TOOLS}
            if here else {}}


def _cpus() -> object:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count()


def _env() -> dict:
    return {k: v for k, v in sorted(os.environ.items())
            if k.startswith(ENV_PREFIXES) or k in ENV_NAMES}


def _nvidia_smi() -> dict:
    path = shutil.which("nvidia-smi")
    result = {"path": path, "rc": None, "stdout": "", "error": None}
    if not path:
        return result
    try:
        proc = subprocess.run([path, *NVIDIA_SMI_ARGS], capture_output=True,
                              timeout=NVIDIA_SMI_SECONDS)
    except subprocess.TimeoutExpired:
        result["error"] = f"nvidia-smi did not answer in {NVIDIA_SMI_SECONDS} s"
        return result
    except OSError as exc:
        result["error"] = err_text(exc)
        return result
    result["rc"] = proc.returncode
    result["stdout"] = proc.stdout.decode("utf-8", "replace")
    if proc.returncode != 0:
        result["error"] = proc.stderr.decode("utf-8", "replace").strip()[-2000:] or None
    return result


def _dev_nvidia() -> object:
    try:
        return sum(1 for n in os.listdir("/dev") if re.fullmatch(r"nvidia[0-9]+", n))
    except OSError:
        return None


def _safe(fn, *args):
    try:
        return fn(*args)
    except Exception:
        return None


def facts(names: list, port) -> dict:
    hostname = _safe(socket.gethostname) or ""
    ifaces, ifaces_from, ifaces_error = interfaces()
    local = []
    for entry in ifaces.values():
        for cidr in entry["ipv4"] + entry["ipv6"]:
            address = cidr.split("/")[0]
            if address not in local:
                local.append(address)
    to_resolve = []
    for name in [*names, hostname]:
        if name and name not in to_resolve:
            to_resolve.append(name)
    out = {
        "schema": SCHEMA,
        "hostname": hostname,
        "fqdn": _safe(socket.getfqdn),
        "python": sys.version.split()[0],
        "resolve": {name: resolve(name) for name in to_resolve},
        "local_addresses": local,
        "interfaces": ifaces,
        "interfaces_from": ifaces_from,
        "interfaces_error": ifaces_error,
        "shm": _shm(),
        "memlock": _memlock(),
        "nofile": _nofile(),
        "port_range": _port_range(),
        "hostname_i": _safe(_hostname_i),
        "session": _safe(_session),
        "cpus": _cpus(),
        "env": _env(),
        "nvidia_smi": _nvidia_smi(),
        "dev_nvidia": _dev_nvidia(),
    }
    if port is not None:
        out["port"] = port_check(port)
    return out


# ---------------------------------------------------------------- listen and connect


def _serve_peer(conn: socket.socket) -> None:
    try:
        conn.settimeout(2.0)
        data = b""
        while b"\n" not in data and len(data) < 64:
            chunk = conn.recv(64)
            if not chunk:
                break
            data += chunk
        if data == HANDSHAKE:
            conn.sendall(HANDSHAKE)
    except OSError:
        pass
    finally:
        conn.close()


def listen(port: int, seconds: float, expect) -> int:
    try:
        sock = _bind(port)
        sock.listen(16)
    except (OSError, OverflowError) as exc:
        holder = (port_holder(port)
                  if isinstance(exc, OSError) and exc.errno == errno.EADDRINUSE else None)
        emit({"listening": False, "port": port, "error": err_text(exc), "holder": holder})
        return 1
    # port 0: the kernel picks one from the ephemeral range, as gloo's and NCCL's listeners do
    emit({"listening": True, "port": sock.getsockname()[1], "address": "0.0.0.0"})
    peers, threads = [], []
    deadline = time.monotonic() + seconds
    try:
        while expect is None or len(peers) < expect:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            sock.settimeout(min(left, 0.5))
            alive()
            try:
                conn, addr = sock.accept()
            except socket.timeout:  # noqa: UP041 (not a TimeoutError before Python 3.10)
                continue
            except OSError:
                break
            peers.append(addr[0])
            t = threading.Thread(target=_serve_peer, args=(conn,), daemon=True)
            t.start()
            threads.append(t)
    finally:
        sock.close()
    for t in threads:
        t.join(3.0)
    emit({"done": True, "peers": peers})
    return 0


def _classify(exc: BaseException) -> str:
    if isinstance(exc, socket.timeout):
        return "timeout"
    if isinstance(exc, ConnectionRefusedError):
        return "refused"
    code = getattr(exc, "errno", None)
    if code == errno.ETIMEDOUT:
        return "timeout"
    if code in (errno.EHOSTUNREACH, errno.ENETUNREACH):
        return "unreachable"
    return "other"


def connect(host: str, port: int, source, timeout: float) -> dict:
    t0 = time.monotonic()
    out = {"ok": False, "host": host, "address": None, "port": port, "source": source,
           "kind": None, "error": None, "handshake": False, "seconds": 0.0}

    def done(kind=None, exc=None) -> dict:
        out["kind"] = kind
        out["error"] = err_text(exc) if exc is not None else None
        out["ok"] = kind is None
        out["seconds"] = round(time.monotonic() - t0, 3)
        return out

    try:
        infos = socket.getaddrinfo(host, port, 0, socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:
        return done("resolve", exc)
    if source:
        src_family = socket.AF_INET6 if ":" in source else socket.AF_INET
        infos = [i for i in infos if i[0] == src_family] or infos
    else:  # IPv4 first, as `facts` lists them
        infos = sorted(infos, key=lambda i: i[0] != socket.AF_INET)
    family, socktype, proto, _canon, sockaddr = infos[0]
    out["address"] = sockaddr[0]
    try:
        sock = socket.socket(family, socktype, proto)
    except OSError as exc:
        return done("other", exc)
    try:
        if source:
            try:
                sock.bind((source, 0))
            except (OSError, OverflowError) as exc:
                return done("bind", exc)
        sock.settimeout(timeout)
        try:
            sock.connect(sockaddr)
        except OSError as exc:  # socket.timeout included
            return done(_classify(exc), exc)
        try:  # a listening `node_probe.py listen` echoes the line; anything else may not
            sock.settimeout(max(0.1, min(2.0, timeout - (time.monotonic() - t0))))
            sock.sendall(HANDSHAKE)
            data = b""
            while len(data) < len(HANDSHAKE):
                chunk = sock.recv(64)
                if not chunk:
                    break
                data += chunk
            out["handshake"] = data == HANDSHAKE
        except OSError:
            out["handshake"] = False
        return done()
    finally:
        sock.close()


def reach(targets: list, timeout: float) -> dict:
    """``connect`` to every ``host:port`` of ``targets`` at once; one result each."""
    results = [None] * len(targets)

    def one(i: int, target: str) -> None:
        host, _, port = target.rpartition(":")
        try:
            results[i] = connect(host.strip("[]"), int(port), None, timeout)
        except Exception as exc:  # a malformed target: said, not raised
            results[i] = {"ok": False, "host": host, "port": port, "kind": "other",
                          "error": err_text(exc)}

    threads = [threading.Thread(target=one, args=(i, t), daemon=True)
               for i, t in enumerate(targets)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout + 5)
    return {"reach": [r for r in results if r is not None]}


# ---------------------------------------------------------------- main


def main(argv) -> int:
    parser = argparse.ArgumentParser(prog="node_probe.py")
    sub = parser.add_subparsers(dest="cmd")
    p_facts = sub.add_parser("facts")
    p_facts.add_argument("--names", default="")
    p_facts.add_argument("--port", type=int)
    p_listen = sub.add_parser("listen")
    p_listen.add_argument("--port", type=int, required=True)
    p_listen.add_argument("--seconds", type=float, required=True)
    p_listen.add_argument("--expect", type=int)
    p_connect = sub.add_parser("connect")
    p_connect.add_argument("--host", required=True)
    p_connect.add_argument("--port", type=int, required=True)
    p_connect.add_argument("--source")
    p_connect.add_argument("--timeout", type=float, default=5.0)
    p_reach = sub.add_parser("reach")
    p_reach.add_argument("--targets", required=True)
    p_reach.add_argument("--timeout", type=float, default=5.0)
    args = parser.parse_args(argv)
    if args.cmd == "facts":
        names = [n.strip() for n in args.names.split(",") if n.strip()]
        emit(facts(names, args.port))
        return 0
    if args.cmd == "listen":
        return listen(args.port, args.seconds, args.expect)
    if args.cmd == "connect":
        result = connect(args.host, args.port, args.source, args.timeout)
        emit(result)
        return 0 if result["ok"] else 1
    if args.cmd == "reach":
        emit(reach([t for t in args.targets.split(",") if t], args.timeout))
        return 0
    parser.print_usage(sys.stderr)
    return 2


if __name__ == "__main__":
    try:
        code = main(sys.argv[1:])
    except SystemExit:
        raise
    except BaseException as exc:  # the promise: a JSON line, never a bare traceback
        emit({"schema": SCHEMA, "error": f"{type(exc).__name__}: {err_text(exc)}"})
        code = 1
    sys.exit(code)
