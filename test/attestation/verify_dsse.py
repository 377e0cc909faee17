#!/usr/bin/env python3
"""Verify a run attestation's DSSE envelope with Debian's securesystemslib (and in-toto),
independently of the project's code: nothing of ours is imported or run.

Usage: verify_dsse.py ATTESTATION.json CELL-KEYS.json
  ATTESTATION.json  the attestation file (its dsse_envelope) or a bare DSSE envelope
  CELL-KEYS.json    the cell's /.well-known/cell-keys.json (kid -> Ed25519 JWK)
Exit 0 and print the run id when the envelope verifies; exit 1 with the reason otherwise.

securesystemslib 0.26 and in-toto 1.3 (Debian bookworm) predate their DSSE envelope classes
(securesystemslib 0.27, in-toto 2.0), so the pre-authentication encoding is written here, as
the DSSE protocol (secure-systems-lab/dsse, protocol.md) defines it:
  PAE(type, body) = "DSSEv1" SP LEN(type) SP type SP LEN(body) SP body
and the Ed25519 signature over it is verified by securesystemslib's key API
(SSlibKey.verify_signature), the in-toto Statement v1 checked against its specification.
"""
import base64
import hashlib
import json
import sys

import in_toto  # noqa: F401  (Debian's in-toto: the framework the statement belongs to)
from securesystemslib.exceptions import UnverifiedSignatureError, VerificationError
from securesystemslib.signer import Signature, SSlibKey

IN_TOTO = "application/vnd.in-toto+json"
STATEMENT_V1 = "https://in-toto.io/Statement/v1"


def b64(s):
    return base64.b64decode(s, validate=True)


def b64url(s):
    return base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))


def pae(payload_type, body):
    t = payload_type.encode("utf-8")
    return b"DSSEv1 %d %s %d %s" % (len(t), t, len(body), body)


def fail(reason):
    print("REFUSED: " + reason)
    sys.exit(1)


def main():
    with open(sys.argv[1], encoding="utf-8") as f:
        doc = json.load(f)
    env = doc.get("dsse_envelope", doc)
    with open(sys.argv[2], encoding="utf-8") as f:
        published = json.load(f)
    keys = {}
    for k in published["keys"]:
        jwk = k["jwk"]
        if jwk.get("kty") == "OKP" and jwk.get("crv") == "Ed25519":
            # securesystemslib's key ids are hex digests: the kid (an RFC 7638 thumbprint) is mapped to one.
            sslib_id = hashlib.sha256(k["kid"].encode("utf-8")).hexdigest()
            keys[k["kid"]] = SSlibKey(sslib_id, "ed25519", "ed25519", {"public": b64url(jwk["x"]).hex()})
    try:
        body = b64(env["payload"])
        payload_type = env["payloadType"]
        signatures = env["signatures"]
    except (KeyError, TypeError, ValueError) as e:
        fail("not a DSSE envelope: %r" % e)
    verified = []
    for s in signatures:
        key = keys.get(s.get("keyid"))
        if key is None:
            continue
        try:
            key.verify_signature(Signature(key.keyid, b64(s["sig"]).hex()), pae(payload_type, body))
        except (UnverifiedSignatureError, VerificationError, ValueError) as e:
            fail("signature of %s does not verify: %s" % (s.get("keyid"), e))
        verified.append(s["keyid"])
    if not verified:
        fail("no signature by a published key")
    if payload_type != IN_TOTO:
        fail("payloadType is not %s" % IN_TOTO)
    try:
        statement = json.loads(body.decode("utf-8"))
    except ValueError:
        fail("the payload is not JSON")
    if statement.get("_type") != STATEMENT_V1:
        fail("not an in-toto Statement v1")
    subjects = statement.get("subject")
    if not isinstance(subjects, list) or not subjects:
        fail("a statement names at least one subject")
    for s in subjects:
        digest = s.get("digest") if isinstance(s, dict) else None
        if not isinstance(digest, dict) or not digest or not all(isinstance(v, str) for v in digest.values()):
            fail("a subject without a digest set")
    if not isinstance(statement.get("predicateType"), str) or "predicate" not in statement:
        fail("a statement carries a predicateType and a predicate")
    print("VERIFIED %s by %s (%s)" % (statement["predicate"]["run"]["run_id"], ",".join(verified), statement["predicateType"]))


if __name__ == "__main__":
    main()
