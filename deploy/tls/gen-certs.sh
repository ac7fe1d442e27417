#!/bin/sh
# gen-certs.sh -- a throwaway CA and the certificates for TLS between redlockd and its
# masters, for trying it out (docker-compose.tls.yml, deploy/kubernetes/tls).  In
# production use your own PKI (cert-manager, Vault, the managed Redis' CA).
#
#   deploy/tls/gen-certs.sh DIR [NAME...]
#
# NAME... are the names the masters are reached by (default: redis1..redis5, the compose
# services); every one goes into the masters' certificate, which they share.  Writes:
#   DIR/ca-key.pem                          the CA's key: keep it out of every container
#   DIR/redis/{ca,redis,redis-key}.pem      for the masters (tls-cert-file, tls-key-file,
#                                           tls-ca-cert-file); also a client certificate, so
#                                           that a healthcheck's redis-cli can present it
#   DIR/redlockd/{ca,redlockd,redlockd-key}.pem
#                                           for redlockd (--redis-tls-ca-file,
#                                           --redis-tls-cert, --redis-tls-key)
# The keys are readable by all (0644) so that the containers' own users (redis, 10001)
# can read them from a bind mount: fine for a trial on one machine, not beyond it.
# Valid 365 days; ECDSA P-256.  Needs openssl.
set -eu
[ $# -ge 1 ] || { echo "usage: $0 DIR [NAME...]" >&2; exit 2; }
DIR=$1
shift
[ $# -gt 0 ] || set -- redis1 redis2 redis3 redis4 redis5
command -v openssl >/dev/null || { echo "$0: openssl not found" >&2; exit 1; }
mkdir -p "$DIR/redis" "$DIR/redlockd"
cd "$DIR"
san="subjectAltName="
sep=
for n in "$@"; do
    case $n in
        *[!A-Za-z0-9.-]*) echo "$0: '$n' is not a DNS name" >&2; exit 2 ;;
    esac
    san="${san}${sep}DNS:$n"
    sep=,
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
openssl ecparam -name prime256v1 -genkey -noout -out ca-key.pem 2>/dev/null
openssl req -x509 -new -key ca-key.pem -days 365 -subj "/CN=redlockd masters CA" -out ca.pem
chmod 600 ca-key.pem
printf '%s\nextendedKeyUsage=serverAuth,clientAuth\n' "$san" >"$tmp/redis.ext"
printf 'extendedKeyUsage=clientAuth\n' >"$tmp/redlockd.ext"
for who in redis redlockd; do
    openssl ecparam -name prime256v1 -genkey -noout -out "$who/$who-key.pem" 2>/dev/null
    openssl req -new -key "$who/$who-key.pem" -subj "/CN=$who" -out "$tmp/$who.csr"
    openssl x509 -req -in "$tmp/$who.csr" -CA ca.pem -CAkey ca-key.pem -CAcreateserial -days 365 \
        -extfile "$tmp/$who.ext" -out "$who/$who.pem" 2>/dev/null
    cp ca.pem "$who/ca.pem"
    chmod 644 "$who/$who-key.pem" "$who/$who.pem" "$who/ca.pem"
done
rm -f ca.srl
echo "$DIR: CA, masters' certificate for $(echo "$san" | sed 's/subjectAltName=//; s/DNS://g'), redlockd's client certificate"
