#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Makes a test certificate authority and node certificates for the interconnect's mutual TLS
# (interconnect/tls_transport.h), with the `openssl` CLI. All keys are EC P-256, unencrypted.
# For tests, benchmarks and local clusters: a real deployment's CA keeps its key elsewhere.
#
#   scripts/make-test-certs.sh [--expired N]... [--foreign-ca] [--nameless] [--etcd] DIR [NODE_ID]...
#
# Writes into DIR (created if missing):
#   ca.crt, ca.key                  the CA (CN=troupe-test-ca), valid 10 years: the `ca_file`
#   node<N>.crt, node<N>.key        per NODE_ID, signed by the CA, valid 2 years, with
#                                   subjectAltName=DNS:node<N>,IP:127.0.0.1 and
#                                   extendedKeyUsage=serverAuth,clientAuth: `cert_file`, `key_file`
#   --expired N (repeatable)        also expired-node<N>.crt/.key: node N's certificate from the
#                                   same CA, valid only in 2020 (`openssl ca` with explicit dates:
#                                   OpenSSL 3.0 has no negative -days)
#   --foreign-ca                    also foreign-ca.crt/.key (CN=troupe-foreign-ca) and, per
#                                   NODE_ID, foreign-node<N>.crt/.key signed by it
#   --nameless                      also nameless.crt/.key: signed by the CA, valid, but naming no
#                                   node (DNS:localhost, CN=troupe-nameless)
#   --etcd                          also, for etcd over TLS, signed by the CA:
#                                   etcd-server.crt/.key (subjectAltName=DNS:localhost,
#                                   IP:127.0.0.1; serverAuth and clientAuth, since etcd's JSON
#                                   gateway presents it to etcd itself): etcd's --cert-file and
#                                   --key-file, with ca.crt as its --trusted-ca-file;
#                                   etcd-client.crt/.key (CN=troupe-etcd-client, clientAuth
#                                   only): interconnect.etcd.tls.cert_file and key_file; with
#                                   --foreign-ca also foreign-etcd-client.crt/.key, signed by the
#                                   foreign CA
#
# Example (the README's two-node cluster; then an etcd over TLS):
#   scripts/make-test-certs.sh /tmp/troupe-certs 1 2
#   scripts/make-test-certs.sh --etcd /tmp/troupe-etcd-certs
#   openssl verify -CAfile /tmp/troupe-certs/ca.crt /tmp/troupe-certs/node1.crt
#
# Exits 2 on bad usage, non-zero with openssl's message when openssl fails.
set -euo pipefail

# usage STATUS: prints the comment above and exits with STATUS.
usage() {
  sed -n '3,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p;}' "$0" >&2
  exit "$1"
}

expired=()
foreign=0
nameless=0
etcd=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --expired)
      [[ $# -ge 2 && "$2" =~ ^[1-9][0-9]*$ ]] || usage 2
      expired+=("$2")
      shift 2
      ;;
    --foreign-ca)
      foreign=1
      shift
      ;;
    --nameless)
      nameless=1
      shift
      ;;
    --etcd)
      etcd=1
      shift
      ;;
    -h | --help) usage 0 ;;
    -*)
      echo "make-test-certs: unknown option $1" >&2
      usage 2
      ;;
    *) break ;;
  esac
done
[[ $# -ge 1 ]] || usage 2
dir="$1"
shift
nodes=("$@")
for node in "${nodes[@]}" "${expired[@]}"; do
  if ! [[ "$node" =~ ^[1-9][0-9]*$ ]] || ((node > 1048575)); then
    echo "make-test-certs: node id must be 1 to 1048575, got '$node'" >&2
    exit 2
  fi
done
command -v openssl >/dev/null || {
  echo "make-test-certs: the openssl CLI is missing (apt-get install openssl)" >&2
  exit 1
}

mkdir -p "$dir"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# quiet COMMAND...: runs COMMAND, showing its stderr only when it fails (openssl chats on success).
quiet() {
  if ! "$@" 2>"$work/stderr"; then
    cat "$work/stderr" >&2
    echo "make-test-certs: failed: $*" >&2
    exit 1
  fi
}

# make_key FILE: a fresh P-256 key.
make_key() {
  quiet openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1"
  chmod 600 "$1"
}

# make_ca NAME CN: a self-signed CA, NAME.crt and NAME.key.
make_ca() {
  make_key "$dir/$1.key"
  quiet openssl req -x509 -new -key "$dir/$1.key" -sha256 -days 3650 -subj "/CN=$2" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
    -out "$dir/$1.crt"
}

# extensions SAN [EKU]: the extension file of a certificate (EKU: serverAuth,clientAuth unless
# given).
extensions() {
  cat >"$work/ext.cnf" <<EOF
basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature
extendedKeyUsage=${2:-serverAuth,clientAuth}
subjectAltName=$1
EOF
}

# make_cert CA NAME CN SAN [EKU]: NAME.key and NAME.crt signed by CA, valid two years from now.
make_cert() {
  make_key "$dir/$2.key"
  quiet openssl req -new -key "$dir/$2.key" -subj "/CN=$3" -out "$work/$2.csr"
  extensions "$4" "${5:-}"
  quiet openssl x509 -req -in "$work/$2.csr" -CA "$dir/$1.crt" -CAkey "$dir/$1.key" \
    -CAcreateserial -CAserial "$work/$1.srl" -sha256 -days 730 -extfile "$work/ext.cnf" \
    -out "$dir/$2.crt"
}

# make_expired_cert NODE: expired-node<NODE>.key/.crt, signed by the CA, valid only in 2020.
make_expired_cert() {
  local name="expired-node$1"
  make_key "$dir/$name.key"
  quiet openssl req -new -key "$dir/$name.key" -subj "/CN=node$1" -out "$work/$name.csr"
  extensions "DNS:node$1,IP:127.0.0.1"
  mkdir -p "$work/ca/new"
  : >"$work/ca/index.txt"
  quiet openssl rand -hex 16 >"$work/ca/serial"
  cat >"$work/ca.cnf" <<EOF
[ca]
default_ca = test_ca
[test_ca]
database = $work/ca/index.txt
new_certs_dir = $work/ca/new
serial = $work/ca/serial
default_md = sha256
policy = any
unique_subject = no
[any]
commonName = supplied
EOF
  quiet openssl ca -batch -config "$work/ca.cnf" -cert "$dir/ca.crt" -keyfile "$dir/ca.key" \
    -startdate 20200101000000Z -enddate 20201231235959Z -extfile "$work/ext.cnf" \
    -in "$work/$name.csr" -out "$dir/$name.crt" -notext
}

make_ca ca troupe-test-ca
for node in "${nodes[@]}"; do
  make_cert ca "node$node" "node$node" "DNS:node$node,IP:127.0.0.1"
done
for node in "${expired[@]}"; do
  make_expired_cert "$node"
done
if ((foreign)); then
  make_ca foreign-ca troupe-foreign-ca
  for node in "${nodes[@]}"; do
    make_cert foreign-ca "foreign-node$node" "node$node" "DNS:node$node,IP:127.0.0.1"
  done
fi
if ((nameless)); then
  make_cert ca nameless troupe-nameless "DNS:localhost,IP:127.0.0.1"
fi
if ((etcd)); then
  make_cert ca etcd-server troupe-etcd-server "DNS:localhost,IP:127.0.0.1"
  make_cert ca etcd-client troupe-etcd-client "DNS:troupe-etcd-client" clientAuth
  if ((foreign)); then
    make_cert foreign-ca foreign-etcd-client troupe-etcd-client "DNS:troupe-etcd-client" clientAuth
  fi
fi
echo "make-test-certs: wrote $(find "$dir" -maxdepth 1 -name '*.crt' | wc -l) certificates to $dir"
