"""Rules about NCCL: which libnccl torch loads (two NCCL wheels at once, a system libnccl on
LD_LIBRARY_PATH / LD_PRELOAD against torch's pin) and an NCCL symbol the loaded library lacks
(in torch's own library, in an extension's, or named alone)."""

from __future__ import annotations

import re
import shlex

from envgen.doctor.context import Context, known, major_minor
from envgen.doctor.reports.errors import nccl_symbol_of

_SO_VERSION = re.compile(r"libnccl\.so\.(\d+(?:\.\d+){1,2})")


def nccl_mismatch(ctx: Context) -> None:
    s = ctx.s
    wheels = {}
    names = set(ctx.catalog.section("nccl").get("wheels", ()))  # curated/doctor.toml [nccl]
    if known(s.packages):
        wheels = {n.lower(): v for n, v in s.packages.items() if n.lower() in names}
    torch_cuda = major_minor(s.torch_cuda) if known(s.torch_cuda) and s.torch_cuda else None
    build = ctx.torch_build
    if len(wheels) > 1:
        keep = f"nvidia-nccl-cu{torch_cuda.split('.')[0]}" if torch_cuda else None
        extra = sorted(w for w in wheels if w != keep)
        pin = build.nccl if build is not None and build.nccl else wheels.get(keep or "")
        command = None
        if keep and keep in wheels:
            command = ctx.pip("uninstall", "-y", *extra)
            if pin:  # the wheels share nvidia/nccl/lib: removing one removes the other's copy
                command += " && " + ctx.pip("install", "--force-reinstall", "--no-deps",
                                            f"{keep}=={pin}")
        listed = ", ".join(f"{k} {v}" for k, v in sorted(wheels.items()))
        ctx.finding("nccl_mismatch",
                    f"{len(wheels)} NCCL wheels are installed ({listed}); "
                    + (f"torch {s.torch} needs one" if known(s.torch) else "torch needs one")
                    + (f": {keep}" if keep else ""),
                    evidence={"nccl_wheels": wheels, "torch_cuda": s.torch_cuda,
                              "torch_nccl": s.torch_nccl, "torch_pins": pin},
                    fix=(f"remove {', '.join(extra)} and reinstall {keep}"
                         + (f"=={pin}" if pin else "") + " (torch's pin)") if keep else
                        "keep only the NCCL wheel torch requires",
                    command=command)
    system = s.nccl_system if known(s.nccl_system) else None
    torch_nccl = s.torch_nccl if known(s.torch_nccl) else None
    env = s.env if known(s.env) else {}
    if system and torch_nccl:
        m = _SO_VERSION.search(system)
        if m and major_minor(m.group(1)) != major_minor(torch_nccl):
            via = "LD_PRELOAD" if "nccl" in env.get("LD_PRELOAD", "") else "LD_LIBRARY_PATH"
            command = "unset LD_PRELOAD" if via == "LD_PRELOAD" else None
            if via == "LD_LIBRARY_PATH" and "LD_LIBRARY_PATH" in env:
                folder = system.rsplit("/", 1)[0]
                keep_dirs = [d for d in env["LD_LIBRARY_PATH"].split(":")
                             if d and d.rstrip("/") != folder]
                command = f"export LD_LIBRARY_PATH={shlex.quote(':'.join(keep_dirs))}"
            ctx.finding("nccl_mismatch",
                        f"{via} makes the loader take {system} (NCCL {m.group(1)}) before "
                        f"torch's own NCCL {torch_nccl}",
                        evidence={"nccl_system": system, "torch_nccl": torch_nccl,
                                  via: env.get(via)},
                        fix=f"take that NCCL out of {via} so torch loads the one it was built "
                            "with",
                        command=command)
    line = (s.errors if known(s.errors) else {}).get("nccl_symbol")
    if line and len(wheels) <= 1 and not any(f.kind == "nccl_mismatch" for f in ctx.findings):
        _nccl_symbol(ctx, line, wheels, torch_cuda)
    if build is not None and build.nccl and torch_nccl and len(wheels) <= 1 \
            and major_minor(build.nccl) != major_minor(torch_nccl):
        ctx.finding("nccl_mismatch",
                    f"torch {s.torch} pins NCCL {build.nccl} but loads NCCL {torch_nccl}",
                    evidence={"torch": s.torch, "torch_pins": build.nccl,
                              "torch_nccl": torch_nccl},
                    fix="reinstall the NCCL torch pins",
                    command=ctx.pip("install", "--force-reinstall", "--no-deps",
                                    f"nvidia-nccl-cu{torch_cuda.split('.')[0]}=={build.nccl}")
                    if torch_cuda else None,
                    severity="warning")


def _nccl_symbol(ctx: Context, line: str, wheels: dict, torch_cuda: str | None) -> None:
    """An undefined ``nccl…`` symbol: the libnccl.so.2 the loader took lacks a function the
    library being loaded was built against. In torch's own library: not torch's NCCL (its pin
    fixes it); in an extension's: an NCCL older than the one it was built against (torch's pin
    may be that older one); with no library named: either, a warning."""
    s, build = ctx.s, ctx.torch_build
    library, symbol = nccl_symbol_of(line) or (None, "nccl…")
    path = (library or "").replace("\\", "/")
    ours = "/torch/lib/" in path or "/torch/_C" in path
    wheel = f"nvidia-nccl-cu{torch_cuda.split('.')[0]}" if torch_cuda else None
    pin = build.nccl if build is not None and build.nccl else None
    evidence = {"error": line[:200], "library": library, "symbol": symbol,
                "torch": s.torch if known(s.torch) else None, "torch_pins": pin,
                "nccl_wheels": wheels or None}
    source = ctx.catalog.section("error_lines").get("nccl_symbol")
    if not wheels:
        ctx.need("nccl wheels", "which NCCL wheels (and system libnccl) are installed says which "
                 "libnccl.so.2 was loaded", "`pip list | grep -i nccl` (and `echo "
                 "$LD_LIBRARY_PATH $LD_PRELOAD`)")
    if ours:
        ctx.finding("nccl_mismatch",
                    f"torch's own library misses the NCCL symbol {symbol}: the libnccl.so.2 the "
                    "loader took is not the NCCL torch was built with",
                    evidence=evidence,
                    fix="find the other NCCL: a second nvidia-nccl wheel (`pip list | grep -i "
                        "nccl`), or a system libnccl on LD_LIBRARY_PATH / LD_PRELOAD; keep only "
                        "the NCCL wheel torch pins"
                        + (f" ({wheel}=={pin})" if wheel and pin else ""),
                    command=ctx.pip("install", "--force-reinstall", "--no-deps",
                                    f"{wheel}=={pin}") if wheel and pin else None,
                    severity="error", source=source)
        return
    if library:
        ctx.finding("nccl_mismatch",
                    f"{library.rsplit('/', 1)[-1]} was built against an NCCL that has {symbol}; "
                    "the libnccl.so.2 the loader took lacks it: an older NCCL (a later install "
                    "that pinned one, e.g. torch's) or a second NCCL found first",
                    evidence=evidence,
                    fix="install the NCCL that extension was built against (its build or README "
                        "says which; `pip list | grep -i nccl` shows the installed wheels): `pip "
                        "install --no-deps --force-reinstall nvidia-nccl-cuXX==<that version>`, "
                        "or rebuild the extension against the NCCL installed"
                        + (f"; torch's pin ({wheel}=={pin}) may be the older one" if wheel and pin
                           else ""),
                    severity="error", source=source)
        return
    # which library asked is not said: a warning (the NCCL loaded is not the one it was built
    # against, but whether a wheel, a system libnccl or the extension's own build is to blame
    # the line does not tell)
    ctx.finding("nccl_mismatch",
                f"undefined symbol {symbol}: the libnccl.so.2 the loader took lacks an NCCL "
                "function the library being loaded was built against (an older NCCL, or a "
                "second NCCL wheel or a system libnccl found first); the line does not say "
                "which library asked",
                evidence=evidence,
                fix="`pip list | grep -i nccl`: keep one NCCL wheel, the one torch pins"
                    + (f" ({wheel}=={pin})" if wheel and pin else "")
                    + " (or the newer one an extension was built against), and take any system "
                    "libnccl out of LD_LIBRARY_PATH / LD_PRELOAD",
                severity="warning", source=source)


RULES = (nccl_mismatch,)
__all__ = ["RULES"]
