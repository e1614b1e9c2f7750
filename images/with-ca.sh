#!/bin/sh
# Run one command trusting the build's extra CA certificates (a TLS-intercepting proxy's).
# Copied from envgen's images/with-ca.sh by `envgen make --image`; do not edit.
#
# `envgen build --ca-cert FILE` hands the certificates to BuildKit as the secret envgen-ca,
# mounted only for the RUN steps that download (RUN --mount=type=secret,id=envgen-ca). This
# script puts the system's CAs and those into a temporary bundle, points pip, requests,
# OpenSSL, curl and conda at it for the command, and deletes it when the command ends: no
# layer ever holds the certificates. Without the secret it runs the command unchanged.
set -eu
secret=${ENVGEN_CA_SECRET:-/run/secrets/envgen-ca}
if [ ! -s "$secret" ]; then
    exec "$@"
fi
echo "with-ca: trusting the extra CA certificates (envgen-ca) for: $*" >&2
bundle=$(mktemp "${TMPDIR:-/tmp}/envgen-ca.XXXXXX")
trap 'rm -f "$bundle"' EXIT
trap 'exit 130' INT TERM
system=${SSL_CERT_FILE:-/etc/ssl/certs/ca-certificates.crt}
if [ -r "$system" ]; then
    cat "$system" "$secret" > "$bundle"
else
    cat "$secret" > "$bundle"
fi
PIP_CERT=$bundle SSL_CERT_FILE=$bundle REQUESTS_CA_BUNDLE=$bundle CURL_CA_BUNDLE=$bundle \
    CONDA_SSL_VERIFY=$bundle MAMBA_SSL_VERIFY=$bundle "$@"
