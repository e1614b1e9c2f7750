#!/bin/sh
# envgen's portable compiler wrapper, installed in the image builder as cc and c++.
# Copied from envgen's images/portable-cc.sh by `envgen make --image`; do not edit.
#
# Framework op builders tune CPU code for the build machine (DeepSpeed's cpu_adam:
# -march=native plus -D__AVX512__ when the builder's CPU has AVX-512), so an image built on
# one CPU can die with "Illegal instruction" on another. This wrapper rewrites those flags to
# the portable target in image/portable-flags (curated/images.toml [portable]), then runs the
# real compiler ($ENVGEN_CC / $ENVGEN_CXX; as nvcc, $CUDA_HOME/bin/nvcc, which torch's ninja
# builds call through PYTORCH_NVCC) through ccache when CCACHE_DIR is set.
set -eu
case "$(basename "$0")" in
    nvcc) real=${CUDA_HOME:?CUDA_HOME is not set}/bin/nvcc ;;
    c++|g++|*++) real=${ENVGEN_CXX:?ENVGEN_CXX is not set} ;;
    *) real=${ENVGEN_CC:?ENVGEN_CC is not set} ;;
esac
flags=${ENVGEN_PORTABLE_FLAGS:-/opt/envgen/portable-flags}
for arg do
    shift
    if [ -r "$flags" ]; then
        while IFS=' ' read -r from to; do
            case "$from" in ''|'#'*) continue ;; esac
            if [ "$arg" = "$from" ]; then arg=$to; break; fi
        done < "$flags"
    fi
    set -- "$@" "$arg"
done
if [ -n "${CCACHE_DIR:-}" ] && command -v ccache >/dev/null 2>&1; then
    exec ccache "$real" "$@"
fi
exec "$real" "$@"
